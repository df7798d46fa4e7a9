//! Every reader against the same records: writers and readers round-trip,
//! and truncated, corrupt or random input is an error naming the file and
//! record, never a panic.

use proptest::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use strata_trace::{
    open, CsvWriter, Format, Op, OpenOptions, OracleWriter, Request, Tier, TraceError, Writer,
    WriterOptions,
};

fn arb_request() -> impl Strategy<Value = Request> {
    (
        (0i64..1 << 40, 0u8..3, any::<u64>(), 0u32..5, 0u64..1 << 40),
        (
            proptest::option::of((0u64..1 << 30, 1u64..1 << 20)),
            proptest::option::of(0i64..1 << 30),
            proptest::option::of(0u8..3),
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(0u64..1 << 50),
        ),
    )
        .prop_map(
            |((t, op, object, workload, size), (range, age, tier, lat, hint, next))| {
                // Whole microseconds: exactly representable in the default unit.
                let time = t as f64 / 1e6;
                let mut r = Request::new(
                    time,
                    [Op::Get, Op::Put, Op::Delete][op as usize],
                    object,
                    workload,
                    size,
                );
                if let Some((o, l)) = range {
                    r.offset = Some(o);
                    r.length = Some(l);
                }
                r.create_time = age.map(|a| (t - a) as f64 / 1e6);
                r.tier = tier.map(|i| [Tier::Ram, Tier::Flash, Tier::Disk][i as usize]);
                r.latency_us = lat;
                r.cache_hint = hint;
                r.next_access = next;
                r
            },
        )
}

fn read_all(path: &Path) -> Result<Vec<Request>, TraceError> {
    open(path)?.collect()
}

fn write_strata(path: &Path, reqs: &[Request], block: u32) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = Writer::with_options(
        std::io::BufWriter::new(f),
        WriterOptions {
            block_records: block,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    w.name_workload(0, "photos").unwrap();
    for (i, r) in reqs.iter().enumerate() {
        if i == reqs.len() / 2 {
            w.name_workload(3, "thumbs").unwrap();
        }
        w.write(r).unwrap();
    }
    w.finish().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn strata_binary_round_trips(reqs in proptest::collection::vec(arb_request(), 0..300), block in 1u32..100) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.strace");
        write_strata(&path, &reqs, block);
        let mut reader = open(&path).unwrap();
        prop_assert_eq!(reader.format(), Format::Strata);
        let back: Vec<Request> = reader.by_ref().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(&back, &reqs);
        if !reqs.is_empty() {
            prop_assert_eq!(reader.workload_name(0), Some("photos"));
            prop_assert_eq!(reader.workload_name(3), Some("thumbs"));
            prop_assert_eq!(reader.workload_name(1), None);
        }
    }

    #[test]
    fn strata_csv_round_trips(reqs in proptest::collection::vec(arb_request(), 1..200)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        let mut w = CsvWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
        for r in &reqs {
            w.write(r).unwrap();
        }
        w.finish().unwrap();
        let mut reader = open(&path).unwrap();
        prop_assert_eq!(reader.format(), Format::StrataCsv);
        let back: Vec<Request> = reader.by_ref().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(&back, &reqs);
    }

    #[test]
    fn oracle_general_round_trips(reqs in proptest::collection::vec(arb_request(), 2..200)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.oracleGeneral.bin");
        let mut w = OracleWriter::new(std::fs::File::create(&path).unwrap());
        let want: Vec<Request> = reqs
            .iter()
            .map(|r| {
                let mut q = Request::new(r.time.floor(), Op::Get, r.object, 0, r.size.min(u32::MAX as u64));
                q.next_access = r.next_access;
                q
            })
            .collect();
        for r in &want {
            w.write(r).unwrap();
        }
        w.finish().unwrap();
        prop_assert_eq!(read_all(&path).unwrap(), want);
    }

    /// Random bytes through every reader: an error or records, never a panic.
    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..3000), magic in 0usize..4) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.bin");
        let mut data = match magic {
            0 => b"STRTRACE".to_vec(),
            1 => 0x1234_5678_9abc_def0u64.to_le_bytes().to_vec(),
            _ => Vec::new(),
        };
        data.extend_from_slice(&bytes);
        std::fs::write(&path, &data).unwrap();
        let _ = read_all(&path);
        for f in Format::ALL {
            if let Ok(r) = OpenOptions::new().format(f).open(&path) {
                for x in r.take(10_000) {
                    if x.is_err() {
                        break;
                    }
                }
            }
        }
        let cols = "time=1,object=2,size=3,op=4,workload=5,offset=6,length=7,tier=8,hint=9".parse().unwrap();
        if let Ok(r) = OpenOptions::new().columns(cols).open(&path) {
            for x in r.take(10_000) {
                if x.is_err() {
                    break;
                }
            }
        }
    }
}

fn sample(n: usize) -> Vec<Request> {
    (0..n)
        .map(|i| {
            let mut r = Request::new(
                i as f64,
                Op::Get,
                (i % 17) as u64 * 1000,
                (i % 3) as u32,
                100 + i as u64,
            );
            if i % 5 == 0 {
                r.latency_us = Some(i as u32);
            }
            r
        })
        .collect()
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Cutting a Strata trace anywhere is an error (after the records before
/// the cut block), and the message names the file and a record number.
#[test]
fn strata_cut_anywhere_is_an_error() {
    let dir = tmp();
    let path = dir.path().join("t.strace");
    let reqs = sample(500);
    write_strata(&path, &reqs, 64);
    let full = std::fs::read(&path).unwrap();
    let cut = dir.path().join("cut.strace");
    for len in (0..full.len()).step_by(7) {
        std::fs::write(&cut, &full[..len]).unwrap();
        let res = match open(&cut) {
            Err(e) => Err(e),
            Ok(r) => {
                let mut got = Vec::new();
                let mut err = None;
                for x in r {
                    match x {
                        Ok(q) => got.push(q),
                        Err(e) => err = Some(e),
                    }
                }
                // Every record delivered before the error is the written one.
                assert_eq!(&reqs[..got.len()], &got[..], "cut at {len}");
                err.map_or(Ok(()), Err)
            }
        };
        let e = res.expect_err("a cut trace must not read as complete");
        let msg = e.to_string();
        assert!(msg.contains("cut.strace"), "{msg}");
        if len >= 32 {
            assert!(msg.contains("record"), "{msg}");
        }
    }
}

/// Flipping any byte of a Strata trace is detected (checksums).
#[test]
fn strata_flipped_byte_is_detected() {
    let dir = tmp();
    let path = dir.path().join("t.strace");
    write_strata(&path, &sample(200), 50);
    let full = std::fs::read(&path).unwrap();
    let bad = dir.path().join("bad.strace");
    for i in 0..full.len() {
        let mut b = full.clone();
        b[i] ^= 0x10;
        std::fs::write(&bad, &b).unwrap();
        let r = OpenOptions::new()
            .format(Format::Strata)
            .open(&bad)
            .and_then(|r| r.collect::<Result<Vec<_>, _>>());
        assert!(r.is_err(), "flip at byte {i} went unnoticed");
    }
}

/// A names frame naming a workload id past the name table's bound (a few
/// bytes that would make the table hundreds of MB) is refused, naming the
/// file and the record; the largest id allowed reads.
#[test]
fn a_workload_name_past_the_bound_is_refused_naming_the_record() {
    let dir = tmp();
    for (id, ok) in [((1u32 << 16) - 1, true), (1 << 16, false), (1 << 24, false)] {
        let path = dir.path().join(format!("names-{id}.strace"));
        let f = std::fs::File::create(&path).unwrap();
        let mut w =
            Writer::with_options(std::io::BufWriter::new(f), WriterOptions::default()).unwrap();
        w.write(&sample(1)[0]).unwrap();
        w.name_workload(id, "far").unwrap();
        w.write(&sample(2)[1]).unwrap();
        w.finish().unwrap();
        let r = read_all(&path);
        if ok {
            assert_eq!(r.unwrap().len(), 2);
        } else {
            let e = r.unwrap_err().to_string();
            assert!(e.contains(&format!("workload id {id}")), "{e}");
            assert!(e.contains("names-") && e.contains("record 2"), "{e}");
        }
    }
}

/// Fixed-record formats cut mid-record report the truncated record.
#[test]
fn fixed_records_cut_mid_record() {
    let dir = tmp();
    let path = dir.path().join("t.oracleGeneral.bin");
    let mut w = OracleWriter::new(std::fs::File::create(&path).unwrap());
    for r in sample(10) {
        w.write(&r).unwrap();
    }
    w.finish().unwrap();
    let full = std::fs::read(&path).unwrap();
    std::fs::write(&path, &full[..24 * 7 + 5]).unwrap();
    let mut r = open(&path).unwrap();
    for _ in 0..7 {
        r.next().unwrap().unwrap();
    }
    match r.next() {
        Some(Err(TraceError::Truncated {
            record,
            have,
            need,
            path: p,
        })) => {
            assert_eq!((record, have, need), (8, 5, 24));
            assert_eq!(p, path);
        }
        other => panic!("expected a truncation error, got {other:?}"),
    }
    assert!(r.next().is_none());

    // vscsi: a record with an unknown SCSI command names its record.
    let vs = dir.path().join("t.vscsi");
    let mut data = Vec::new();
    for i in 0..4u64 {
        let mut rec = [0u8; 32];
        rec[4..8].copy_from_slice(&512u32.to_le_bytes());
        let cmd: u16 = if i == 2 { 0x35 } else { 0x28 };
        rec[12..14].copy_from_slice(&cmd.to_le_bytes());
        rec[14..16].copy_from_slice(&0x0100u16.to_le_bytes());
        rec[16..24].copy_from_slice(&(1000 + i).to_le_bytes());
        rec[24..32].copy_from_slice(&(i * 1_000_000).to_le_bytes());
        data.extend_from_slice(&rec);
    }
    std::fs::write(&vs, &data).unwrap();
    let got: Vec<_> = open(&vs).unwrap().collect();
    assert_eq!(got.len(), 3);
    assert_eq!(got[1].as_ref().unwrap().time, 1.0);
    let msg = got[2].as_ref().unwrap_err().to_string();
    assert!(
        msg.contains("t.vscsi") && msg.contains("record 3") && msg.contains("0x35"),
        "{msg}"
    );
}

fn write_text(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::File::create(&p)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    p
}

#[test]
fn csv_errors_name_file_record_and_line() {
    let dir = tmp();
    let p = write_text(
        dir.path(),
        "ops.csv",
        "time,op,object,size\n1,get,a,10\n# comment\n2,frobnicate,b,20\n",
    );
    let got: Vec<_> = open(&p).unwrap().collect();
    assert_eq!(got.len(), 2);
    let msg = got[1].as_ref().unwrap_err().to_string();
    assert!(
        msg.contains("ops.csv")
            && msg.contains("record 2")
            && msg.contains("line 4")
            && msg.contains("frobnicate"),
        "{msg}"
    );
    let p = write_text(dir.path(), "short.csv", "time,op,object,size\n1,get,a\n");
    let e = open(&p).unwrap().next().unwrap().unwrap_err().to_string();
    assert!(e.contains("record 1") && e.contains("field"), "{e}");
}

#[test]
fn strata_csv_with_names_ranges_and_workloads() {
    let dir = tmp();
    let p = write_text(
        dir.path(),
        "s.csv",
        "time,op,object,size,workload,offset,length,tier,latency_us,hint,extra\n\
         0.5,put,photo/1.jpg,4096,photos,,,,,,x\n\
         1.25,get,photo/1.jpg,4096,photos,0,512,flash,130,false,y\n\
         2,delete,thumb/9,100,thumbs,,,,,,z\n",
    );
    let mut r = open(&p).unwrap();
    assert_eq!(r.format(), Format::StrataCsv);
    let reqs: Vec<Request> = r.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0].object, strata_trace::hash_object_id(b"photo/1.jpg"));
    assert_eq!(reqs[0].object, reqs[1].object);
    assert_eq!(
        (reqs[1].offset, reqs[1].length, reqs[1].tier),
        (Some(0), Some(512), Some(Tier::Flash))
    );
    assert_eq!(
        (reqs[1].latency_us, reqs[1].cache_hint),
        (Some(130), Some(false))
    );
    assert_eq!(reqs[1].bytes(), 512);
    assert_eq!((reqs[0].workload, reqs[2].workload), (0, 1));
    assert_eq!(reqs[2].op, Op::Delete);
    assert_eq!(r.workload_name(1), Some("thumbs"));
}

#[test]
fn column_map_reads_any_csv() {
    let dir = tmp();
    // Tab-separated, op in column 2, time in milliseconds, a header by name.
    let p = write_text(
        dir.path(),
        "x.tsv",
        "ts\tkind\tkey\tbytes\n1500\tGET\tk1\t10\n2500\tSET\tk2\t20\n",
    );
    let cols = "time=ts,op=kind,object=key,size=bytes,time_unit=ms"
        .parse()
        .unwrap();
    let reqs: Vec<Request> = OpenOptions::new()
        .columns(cols)
        .open(&p)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(reqs.len(), 2);
    assert_eq!((reqs[0].time, reqs[0].op, reqs[0].size), (1.5, Op::Get, 10));
    assert_eq!((reqs[1].time, reqs[1].op, reqs[1].size), (2.5, Op::Put, 20));
    // By number, no header.
    let p = write_text(dir.path(), "y.csv", "7;r;99;4\n8;w;98;5\n");
    let cols = "time=1,op=2,object=3,size=4".parse().unwrap();
    let reqs: Vec<Request> = OpenOptions::new()
        .columns(cols)
        .open(&p)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        (reqs[1].time, reqs[1].op, reqs[1].object, reqs[1].size),
        (8.0, Op::Put, 98, 5)
    );
    // A name the header does not have is an error that lists the header.
    let cols = "object=nope".parse().unwrap();
    let e = OpenOptions::new()
        .columns(cols)
        .open(dir.path().join("x.tsv"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap_err();
    assert!(e.to_string().contains("no column \"nope\""), "{e}");
}

#[test]
fn msr_cambridge_csv() {
    let dir = tmp();
    let p = write_text(
        dir.path(),
        "hm_0.csv",
        "128166372003061629,hm,0,Read,383517868032,32768,161\n\
         128166372016382155,hm,0,Write,3236163584,4096,2101\n\
         128166372026382245,prn,1,Read,383517868032,512,50\n",
    );
    let mut r = open(&p).unwrap();
    assert_eq!(r.format(), Format::Msr);
    let reqs: Vec<Request> = r.by_ref().collect::<Result<_, _>>().unwrap();
    // 128166372003061629 filetime = 2007-02-22 ... in Unix seconds.
    let unix = (128_166_372_003_061_629u64 - 116_444_736_000_000_000) as f64 / 1e7;
    assert!((reqs[0].time - unix).abs() < 1e-6);
    assert!((reqs[1].time - reqs[0].time - 1.3320526).abs() < 1e-6);
    assert_eq!((reqs[0].op, reqs[1].op), (Op::Get, Op::Put));
    assert_eq!(
        (reqs[0].object, reqs[0].size, reqs[0].latency_us),
        (383_517_868_032, 32768, Some(16))
    );
    assert_eq!(reqs[2].workload, 1);
    assert_ne!(
        reqs[2].object, reqs[0].object,
        "same offset on another disk is another object"
    );
    assert_eq!(r.workload_name(0), Some("hm_0"));
    assert_eq!(r.workload_name(1), Some("prn_1"));
}

#[test]
fn gzip_and_zstd_by_magic_not_name() {
    let dir = tmp();
    let text = "# time, object, size, next_access_vtime\n0, 5, 100, 2\n1, 6, 200, -1\n2, 5, 100, 9223372036854775807\n";
    let plain = write_text(dir.path(), "a.csv", text);
    let want = read_all(&plain).unwrap();
    assert_eq!(want.len(), 3);
    assert_eq!(
        (
            want[0].next_access,
            want[1].next_access,
            want[2].next_access
        ),
        (Some(2), None, None)
    );
    // gzip under a name that says nothing.
    let gz = dir.path().join("a.data");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap();
    assert_eq!(read_all(&gz).unwrap(), want);
    let zs = dir.path().join("b.csv.zst");
    std::fs::write(&zs, zstd::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
    assert_eq!(read_all(&zs).unwrap(), want);
    // A corrupt compressed stream is an I/O error naming the file.
    let mut bytes = std::fs::read(&zs).unwrap();
    let n = bytes.len();
    bytes.truncate(n - 6);
    std::fs::write(&zs, &bytes).unwrap();
    let err = match open(&zs) {
        Err(e) => e,
        Ok(r) => r
            .filter_map(Result::err)
            .next()
            .expect("cut zstd must fail"),
    };
    assert!(err.to_string().contains("b.csv.zst"), "{err}");
}

#[test]
fn undetectable_and_missing_files_are_clear_errors() {
    let dir = tmp();
    let p = write_text(dir.path(), "n.csv", "1,2,3\n4,5,6\n");
    let e = open(&p).unwrap_err().to_string();
    assert!(e.contains("n.csv") && e.contains("--columns"), "{e}");
    let e = open(dir.path().join("nope.bin")).unwrap_err().to_string();
    assert!(e.contains("nope.bin"), "{e}");
    let p = dir.path().join("empty.bin");
    std::fs::write(&p, b"").unwrap();
    assert!(open(&p).unwrap_err().to_string().contains("empty"));
    let p = dir.path().join("junk.bin");
    std::fs::write(&p, [0xde, 0xad, 0xbe, 0xef, 0, 1, 2]).unwrap();
    assert!(open(&p).unwrap_err().to_string().contains("--format"));
}

/// read_batch and the iterator give the same records, and a trace far
/// longer than one batch streams through bounded buffers.
#[test]
fn batches_and_iterator_agree() {
    let dir = tmp();
    let path = dir.path().join("big.strace");
    let reqs: Vec<Request> = (0..100_000u64)
        .map(|i| {
            Request::new(
                i as f64 / 1000.0,
                Op::Get,
                i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                0,
                i % 1000,
            )
        })
        .collect();
    write_strata(&path, &reqs, 65_536);
    let mut r = open(&path).unwrap();
    let mut batch = Vec::with_capacity(10_000);
    let mut all = Vec::new();
    // Mix: a few records through the iterator, then batches.
    for _ in 0..3 {
        all.push(r.next().unwrap().unwrap());
    }
    loop {
        let n = r.read_batch(&mut batch).unwrap();
        if n == 0 {
            break;
        }
        assert!(n <= 10_000);
        all.extend_from_slice(&batch);
    }
    assert_same(&all, &reqs);
}

fn assert_same(got: &[Request], want: &[Request]) {
    assert_eq!(got.len(), want.len(), "record count");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!("record {}: got {:?}, want {:?}", i + 1, got[i], want[i]);
    }
}

/// LCS: records decode by version, and the header's request count catches a
/// file cut at a record boundary.
#[test]
fn lcs_versions_and_header_count() {
    let dir = tmp();
    let header = |version: u64, n_req: i64| {
        let mut h = vec![0u8; 8192];
        h[..8].copy_from_slice(&0x1234_5678_9abc_def0u64.to_le_bytes());
        h[8..16].copy_from_slice(&version.to_le_bytes());
        h[16..24].copy_from_slice(&1u64.to_le_bytes());
        h[24..32].copy_from_slice(&n_req.to_le_bytes());
        h
    };
    // v2: `<IQIIq`, op 9 (delete) and tenant 7 in the u32 at 16.
    let mut v2 = header(2, 2);
    for (t, id, size, op, tenant, next) in [
        (5u32, 11u64, 100u32, 1u32, 7u32, 1i64),
        (6, 11, 100, 9, 7, -1),
    ] {
        v2.extend_from_slice(&t.to_le_bytes());
        v2.extend_from_slice(&id.to_le_bytes());
        v2.extend_from_slice(&size.to_le_bytes());
        v2.extend_from_slice(&(op | tenant << 8).to_le_bytes());
        v2.extend_from_slice(&next.to_le_bytes());
    }
    let p = dir.path().join("t.lcs");
    std::fs::write(&p, &v2).unwrap();
    let got = read_all(&p).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(
        (got[0].op, got[0].workload, got[0].next_access),
        (Op::Get, 7, Some(1))
    );
    assert_eq!(
        (got[1].op, got[1].time, got[1].next_access),
        (Op::Delete, 6.0, None)
    );
    // The same file claiming 3 requests is cut short.
    let mut short = v2.clone();
    short[24..32].copy_from_slice(&3i64.to_le_bytes());
    std::fs::write(&p, &short).unwrap();
    let e = read_all(&p).unwrap_err().to_string();
    assert!(
        e.contains("counts 3 requests") && e.contains("record 3"),
        "{e}"
    );
    // An unknown op code names its record.
    let mut bad = v2.clone();
    bad[8192 + 28 + 16] = 200;
    std::fs::write(&p, &bad).unwrap();
    let e = read_all(&p).unwrap_err().to_string();
    assert!(
        e.contains("record 2") && e.contains("unknown op code 200"),
        "{e}"
    );
    // An unsupported version is a format error.
    let mut v9 = v2.clone();
    v9[8..16].copy_from_slice(&9u64.to_le_bytes());
    std::fs::write(&p, &v9).unwrap();
    let e = open(&p).unwrap_err().to_string();
    assert!(e.contains("LCS version 9"), "{e}");
}
