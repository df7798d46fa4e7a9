//! The compact storage every policy is built from: a slab of fixed-size
//! nodes addressed by `u32`, intrusive doubly linked lists threaded through
//! them, and a hash index from key to slot that stores only the slot (the key
//! is read back from the node), so a cached object costs one 24-byte node
//! plus about 5 bytes of index.

use hashbrown::HashTable;

/// "No node": the end of a list, or an empty slot link.
pub(crate) const NIL: u32 = u32::MAX;

/// One object's record. `meta` is the policy's own bits (queue id,
/// frequency, flags).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    pub key: u64,
    pub size: u32,
    pub meta: u32,
    pub prev: u32,
    pub next: u32,
}

/// Mixes a key into a hash whose high bits (hashbrown's tag) and low bits
/// (its bucket) both depend on every key bit: a folded 64x64->128 multiply.
#[inline(always)]
pub(crate) fn hash_key(key: u64) -> u64 {
    let m = (key ^ 0x243f_6a88_85a3_08d3) as u128 * 0x9e37_79b9_7f4a_7c15u128;
    (m as u64) ^ ((m >> 64) as u64)
}

/// Nodes, a free list and the key index.
#[derive(Default)]
pub(crate) struct Slab {
    nodes: Vec<Node>,
    free: u32,
    live: usize,
    index: HashTable<u32>,
}

impl Slab {
    pub fn new() -> Slab {
        Slab {
            nodes: Vec::new(),
            free: NIL,
            live: 0,
            index: HashTable::new(),
        }
    }

    /// Pre-sizes for `n` live objects (avoids doubling slack when the
    /// number is known, as in object-count caches).
    pub fn reserve(&mut self, n: usize) {
        let n = n.min(1 << 26);
        self.nodes.reserve_exact(n.saturating_sub(self.nodes.len()));
        let nodes = &self.nodes;
        self.index.reserve(n.saturating_sub(self.live), |&i| {
            hash_key(nodes[i as usize].key)
        });
    }

    #[inline(always)]
    pub fn find(&self, key: u64) -> Option<u32> {
        let nodes = &self.nodes;
        self.index
            .find(hash_key(key), |&i| nodes[i as usize].key == key)
            .copied()
    }

    /// Adds a node for `key` (which must not be in the index) and indexes it.
    #[inline]
    pub fn alloc(&mut self, key: u64, size: u32, meta: u32) -> u32 {
        let node = Node {
            key,
            size,
            meta,
            prev: NIL,
            next: NIL,
        };
        let idx = if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            i
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        let nodes = &self.nodes;
        self.index
            .insert_unique(hash_key(key), idx, |&i| hash_key(nodes[i as usize].key));
        self.live += 1;
        idx
    }

    /// Removes `idx` from the index and returns its slot to the free list.
    /// The node must already be unlinked from any list.
    #[inline]
    pub fn release(&mut self, idx: u32) {
        let key = self.nodes[idx as usize].key;
        if let Ok(e) = self.index.find_entry(hash_key(key), |&i| i == idx) {
            e.remove();
        }
        self.nodes[idx as usize].next = self.free;
        self.nodes[idx as usize].meta = u32::MAX;
        self.free = idx;
        self.live -= 1;
    }

    #[inline(always)]
    pub fn get(&self, idx: u32) -> &Node {
        &self.nodes[idx as usize]
    }

    #[inline(always)]
    pub fn get_mut(&mut self, idx: u32) -> &mut Node {
        &mut self.nodes[idx as usize]
    }

    pub fn live(&self) -> usize {
        self.live
    }

    pub fn clear(&mut self) {
        self.nodes.clear();
        self.index.clear();
        self.free = NIL;
        self.live = 0;
    }

    /// Heap bytes held (node array and index, including unused capacity).
    pub fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.index.capacity() * (std::mem::size_of::<u32>() + 1)
    }
}

/// A doubly linked list through slab nodes; `head` is the newest end.
/// `weight` is the sum of the charged sizes of its nodes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct List {
    pub head: u32,
    pub tail: u32,
    pub len: u32,
    pub weight: u64,
}

impl Default for List {
    fn default() -> List {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
            weight: 0,
        }
    }
}

impl List {
    #[inline(always)]
    pub fn push_front(&mut self, slab: &mut Slab, idx: u32, w: u64) {
        let old = self.head;
        {
            let n = slab.get_mut(idx);
            n.prev = NIL;
            n.next = old;
        }
        if old != NIL {
            slab.get_mut(old).prev = idx;
        } else {
            self.tail = idx;
        }
        self.head = idx;
        self.len += 1;
        self.weight += w;
    }

    #[inline(always)]
    pub fn unlink(&mut self, slab: &mut Slab, idx: u32, w: u64) {
        let (p, n) = {
            let node = slab.get(idx);
            (node.prev, node.next)
        };
        if p != NIL {
            slab.get_mut(p).next = n;
        } else {
            self.head = n;
        }
        if n != NIL {
            slab.get_mut(n).prev = p;
        } else {
            self.tail = p;
        }
        let node = slab.get_mut(idx);
        node.prev = NIL;
        node.next = NIL;
        self.len -= 1;
        self.weight -= w;
    }

    #[inline(always)]
    pub fn move_to_front(&mut self, slab: &mut Slab, idx: u32) {
        if self.head == idx {
            return;
        }
        let (p, n) = {
            let node = slab.get(idx);
            (node.prev, node.next)
        };
        // idx is not the head, so p != NIL.
        slab.get_mut(p).next = n;
        if n != NIL {
            slab.get_mut(n).prev = p;
        } else {
            self.tail = p;
        }
        let old = self.head;
        {
            let node = slab.get_mut(idx);
            node.prev = NIL;
            node.next = old;
        }
        slab.get_mut(old).prev = idx;
        self.head = idx;
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// An LRU-ordered keyed list with its own index: the building block of
/// policies whose queues may hold the same key at once (LIRS).
#[derive(Default)]
pub(crate) struct KeyedList {
    pub slab: Slab,
    pub list: List,
}

impl KeyedList {
    pub fn new() -> KeyedList {
        KeyedList {
            slab: Slab::new(),
            list: List::default(),
        }
    }

    #[inline]
    pub fn find(&self, key: u64) -> Option<u32> {
        self.slab.find(key)
    }

    #[inline]
    pub fn push_front(&mut self, key: u64, size: u32, w: u64, meta: u32) -> u32 {
        let i = self.slab.alloc(key, size, meta);
        self.list.push_front(&mut self.slab, i, w);
        i
    }

    #[inline]
    pub fn remove_idx(&mut self, idx: u32, w: u64) {
        self.list.unlink(&mut self.slab, idx, w);
        self.slab.release(idx);
    }

    pub fn clear(&mut self) {
        self.slab.clear();
        self.list = List::default();
    }
}
