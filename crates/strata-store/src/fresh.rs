//! Reads into buffers that are not zeroed first: the store's one `unsafe`
//! module.
//!
//! A GET allocates a buffer for the needle and has the kernel fill it.
//! Zeroing it first (`vec![0; n]`) wrote every byte once more for nothing:
//! on a 3-node cluster serving 1 MiB GETs from the page cache it was 14%
//! of a node's CPU, as much as the CRC check (docs/benchmarks.md, issue
//! 40). Here the kernel writes into the vector's spare capacity through a
//! raw `iovec` (no Rust reference to memory not yet written is made), and
//! the vector's length is set to what the kernel reported it wrote.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// What one [`read_split`] did.
pub(crate) enum Split {
    /// Every byte was read, in this many system calls: the data after the
    /// head.
    Read(Vec<u8>, u64),
    /// With `nowait`: the page cache did not hold all of it (nothing is
    /// returned; the caller reads again where it may wait).
    NotCached,
}

/// Reads `head.len() + len` bytes of `file` at `offset`: the first into
/// `head`, the rest into a new vector, in one `preadv` unless the kernel
/// returns less (then it goes on where it stopped). With `nowait` it is one
/// `preadv2(RWF_NOWAIT)`, which copies only what the page cache holds and
/// never waits for the device: anything short of all of it is
/// [`Split::NotCached`]. A file system that refuses the flag is read as
/// usual. End of file before the last byte is `UnexpectedEof`.
pub(crate) fn read_split(
    file: &File,
    head: &mut [u8],
    len: usize,
    offset: u64,
    nowait: bool,
) -> io::Result<Split> {
    let fd = file.as_raw_fd();
    let h = head.len();
    let total = h + len;
    let mut data: Vec<u8> = Vec::with_capacity(len);
    let base = data.as_mut_ptr();
    // Bytes read so far, over the head then the data.
    let mut done = 0usize;
    let mut calls = 0u64;
    let mut nowait = nowait;
    while done < total {
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; 2];
        let mut n_iov = 0;
        if done < h {
            iov[0] = libc::iovec {
                iov_base: head[done..].as_mut_ptr().cast(),
                iov_len: h - done,
            };
            n_iov = 1;
        }
        let from = done.saturating_sub(h);
        if from < len {
            iov[n_iov] = libc::iovec {
                // SAFETY: `from < len <= data.capacity()`: the pointer stays
                // inside the vector's allocation.
                iov_base: unsafe { base.add(from) }.cast(),
                iov_len: len - from,
            };
            n_iov += 1;
        }
        let at = (offset + done as u64) as libc::off_t;
        // SAFETY: each iovec names writable memory that lives through the
        // call: the rest of `head` (a live &mut), or the unwritten rest of
        // `data`'s allocation, which the kernel may write as bytes.
        let n = unsafe {
            if nowait {
                libc::preadv2(fd, iov.as_ptr(), n_iov as i32, at, libc::RWF_NOWAIT)
            } else {
                libc::preadv(fd, iov.as_ptr(), n_iov as i32, at)
            }
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) if nowait => return Ok(Split::NotCached),
                Some(libc::EOPNOTSUPP | libc::EINVAL) if nowait => {
                    nowait = false;
                    continue;
                }
                _ => return Err(e),
            }
        }
        calls += 1;
        let n = n as usize;
        if nowait && done + n < total {
            return Ok(Split::NotCached);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("end of file {} bytes short", total - done),
            ));
        }
        done += n;
    }
    // SAFETY: the kernel reported writing every byte of `data[..len]`
    // (the loop ends only once `done == h + len`), and `len` is within the
    // capacity.
    unsafe { data.set_len(len) };
    Ok(Split::Read(data, calls))
}

/// `len` bytes of `file` at `offset` in a new vector, and the system calls
/// it took ([`read_split`] with no head).
pub(crate) fn read_at(file: &File, len: usize, offset: u64) -> io::Result<(Vec<u8>, u64)> {
    match read_split(file, &mut [], len, offset, false)? {
        Split::Read(v, calls) => Ok((v, calls)),
        Split::NotCached => unreachable!("a read that may wait is never refused as not cached"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> (tempfile::NamedTempFile, File) {
        let mut t = tempfile::NamedTempFile::new().unwrap();
        t.write_all(bytes).unwrap();
        t.flush().unwrap();
        let f = File::open(t.path()).unwrap();
        (t, f)
    }

    #[test]
    fn a_split_read_fills_the_head_then_the_data() {
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let (_t, f) = file_of(&bytes);
        for nowait in [false, true] {
            let mut head = [0u8; 24];
            match read_split(&f, &mut head, 5000, 100, nowait).unwrap() {
                Split::Read(d, calls) => {
                    assert_eq!(&head[..], &bytes[100..124]);
                    assert_eq!(d, &bytes[124..5124]);
                    assert_eq!(calls, 1);
                }
                // A page cache that dropped the file since the write.
                Split::NotCached => assert!(nowait),
            }
        }
        let (d, _) = read_at(&f, 10_000, 0).unwrap();
        assert_eq!(d, bytes);
        let (d, _) = read_at(&f, 0, 10_000).unwrap();
        assert!(d.is_empty());
    }

    #[test]
    fn a_read_past_the_end_is_unexpected_eof() {
        let (_t, f) = file_of(&[1u8; 100]);
        let mut head = [0u8; 24];
        let e = read_split(&f, &mut head, 100, 0, false).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let e = read_at(&f, 10, 95).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
