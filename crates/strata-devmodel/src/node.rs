//! A storage node: several disks behind a balancer, a flash device, RAM.

use crate::disk::{Completion, Disk, DiskParams, DiskRequest, IoClass};
use std::collections::HashMap;

/// Largest single disk request: bigger I/O is split so that the scheduler
/// can rotate between files, as the study's 1 MB slices assume.
pub const MAX_IO: u64 = 1 << 20;

/// Disks of one node and the balancer that places local files on them.
///
/// The balancer puts a new file on the disk with the fewest bytes placed so
/// far, then the fewest files (the DataNode's choice in the study); a file then stays on its disk.
#[derive(Debug)]
pub struct Node {
    disks: Vec<Disk>,
    /// Disks the balancer may use for data files (`first_data..disks.len()`).
    first_data: usize,
    placement: HashMap<u64, usize>,
    placed_bytes: Vec<u64>,
    files: Vec<u64>,
    read_bytes: u64,
    write_bytes: u64,
    requests: u64,
}

impl Node {
    /// A node with `disks` identical disks; the first `reserved` are kept out
    /// of the balancer (a dedicated log disk).
    pub fn new(disks: usize, params: DiskParams, reserved: usize) -> Node {
        let n = disks.max(reserved + 1);
        Node {
            disks: (0..n).map(|_| Disk::new(params)).collect(),
            first_data: reserved,
            placement: HashMap::new(),
            placed_bytes: vec![0; n],
            files: vec![0; n],
            read_bytes: 0,
            write_bytes: 0,
            requests: 0,
        }
    }

    /// Number of disks.
    pub fn disks(&self) -> usize {
        self.disks.len()
    }

    /// The disk holding `file`, placing it if new.
    pub fn disk_of(&mut self, file: u64) -> usize {
        if let Some(&d) = self.placement.get(&file) {
            return d;
        }
        let d = (self.first_data..self.disks.len())
            .min_by_key(|&i| (self.placed_bytes[i], self.files[i], i))
            .unwrap_or(0);
        self.placement.insert(file, d);
        self.files[d] += 1;
        d
    }

    /// Forgets a deleted file's placement.
    pub fn forget(&mut self, file: u64) {
        self.placement.remove(&file);
    }

    /// Serves what every disk can finish starting before `t`.
    pub fn advance(&mut self, t: f64, done: &mut impl FnMut(Completion)) {
        for d in &mut self.disks {
            if d.queued() > 0 {
                d.advance(t, done);
            }
        }
    }

    /// Serves everything queued.
    pub fn drain(&mut self, done: &mut impl FnMut(Completion)) {
        for d in &mut self.disks {
            d.drain(done);
        }
    }

    /// Queues an I/O on `disk` (or on the file's balanced disk when `disk` is
    /// `None`), split into requests of at most [`MAX_IO`]; returns how many
    /// disk requests it became. Call [`Node::advance`] to `time` first.
    #[allow(clippy::too_many_arguments)]
    pub fn submit(
        &mut self,
        disk: Option<usize>,
        id: u64,
        time: f64,
        file: u64,
        offset: u64,
        len: u64,
        class: IoClass,
        write: bool,
    ) -> u32 {
        let d = match disk {
            Some(d) => d.min(self.disks.len() - 1),
            None => self.disk_of(file),
        };
        if write {
            self.placed_bytes[d] += len;
            self.write_bytes += len;
        } else {
            self.read_bytes += len;
        }
        let mut n = 0;
        let mut off = offset;
        let end = offset + len.max(1);
        while off < end {
            let l = (end - off).min(MAX_IO);
            self.disks[d].submit(DiskRequest {
                id,
                arrival: time,
                file,
                offset: off,
                len: if len == 0 { 0 } else { l },
                class,
                write,
            });
            self.requests += 1;
            off += l;
            n += 1;
        }
        n
    }

    /// Bytes read from disks.
    pub fn disk_read_bytes(&self) -> u64 {
        self.read_bytes
    }

    /// Bytes written to disks.
    pub fn disk_write_bytes(&self) -> u64 {
        self.write_bytes
    }

    /// Disk requests issued.
    pub fn disk_requests(&self) -> u64 {
        self.requests
    }

    /// Busy seconds of each disk.
    pub fn busy_seconds(&self) -> Vec<f64> {
        self.disks.iter().map(|d| d.busy_seconds()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balancer_spreads_files_and_keeps_them_in_place() {
        let mut node = Node::new(3, DiskParams::default(), 0);
        let mut sink = |_c: Completion| {};
        for f in 0..6u64 {
            node.advance(0.0, &mut sink);
            node.submit(None, f, 0.0, f, 0, 1000, IoClass::Log, true);
        }
        let disks: Vec<usize> = (0..6).map(|f| node.disk_of(f)).collect();
        assert_eq!(disks, vec![0, 1, 2, 0, 1, 2]);
        // A reserved (log) disk never receives balanced files.
        let mut node = Node::new(3, DiskParams::default(), 1);
        assert!((0..10).all(|f| node.disk_of(f) != 0));
    }

    #[test]
    fn big_io_is_split_into_slices() {
        let mut node = Node::new(1, DiskParams::default(), 0);
        let n = node.submit(None, 1, 0.0, 5, 0, 5 * MAX_IO / 2, IoClass::Flush, true);
        assert_eq!(n, 3);
        let mut got = Vec::new();
        node.drain(&mut |c| got.push(c.request.len));
        assert_eq!(got, vec![MAX_IO, MAX_IO, MAX_IO / 2]);
    }
}
