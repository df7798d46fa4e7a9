//! The compact storage every policy is built from: a slab of fixed-size
//! nodes addressed by `u32`, intrusive doubly linked lists threaded through
//! them, and a hash index from key to slot that stores only the slot (the key
//! is read back from the node), so a cached object costs one 24-byte node
//! ([`Node`]) plus about 5 bytes of index. ARC, which keeps as many ghosts as
//! resident objects, uses the 20-byte [`TaggedNode`] instead.

use hashbrown::HashTable;

/// "No node": the end of a list, or an empty slot link.
pub(crate) const NIL: u32 = u32::MAX;

/// What the slab and its lists need of a node.
pub(crate) trait SlabNode: Copy {
    /// A fresh, unlinked node.
    fn new(key: u64, size: u32, meta: u32) -> Self;
    fn key(&self) -> u64;
    fn prev(&self) -> u32;
    fn next(&self) -> u32;
    fn set_prev(&mut self, v: u32);
    fn set_next(&mut self, v: u32);
    /// Marks a released slot, whose `next` now links the free list.
    fn set_free(&mut self, next_free: u32);
}

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

impl SlabNode for Node {
    #[inline(always)]
    fn new(key: u64, size: u32, meta: u32) -> Node {
        Node {
            key,
            size,
            meta,
            prev: NIL,
            next: NIL,
        }
    }
    #[inline(always)]
    fn key(&self) -> u64 {
        self.key
    }
    #[inline(always)]
    fn prev(&self) -> u32 {
        self.prev
    }
    #[inline(always)]
    fn next(&self) -> u32 {
        self.next
    }
    #[inline(always)]
    fn set_prev(&mut self, v: u32) {
        self.prev = v;
    }
    #[inline(always)]
    fn set_next(&mut self, v: u32) {
        self.next = v;
    }
    #[inline(always)]
    fn set_free(&mut self, next_free: u32) {
        self.next = next_free;
        self.meta = u32::MAX;
    }
}

/// A 20-byte node with a 2-bit tag (a queue id) packed into the top of its
/// size: the key is two 32-bit halves (so the node aligns to 4 bytes), and
/// sizes keep 30 bits ([`TAGGED_MAX_SIZE`]). The links stay whole `u32`s,
/// so relinking a neighbour is a plain store, not a read of its cache line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaggedNode {
    key: [u32; 2],
    size_tag: u32,
    prev: u32,
    next: u32,
}

/// The largest size a [`TaggedNode`] keeps (1 GiB - 1).
pub(crate) const TAGGED_MAX_SIZE: u64 = (1 << 30) - 1;

impl TaggedNode {
    /// The 2-bit tag.
    #[inline(always)]
    pub fn tag(&self) -> u32 {
        self.size_tag >> 30
    }
    #[inline(always)]
    pub fn set_tag(&mut self, t: u32) {
        self.size_tag = (self.size_tag & TAGGED_MAX_SIZE as u32) | (t << 30);
    }
    /// The size (clamped to [`TAGGED_MAX_SIZE`] when stored).
    #[inline(always)]
    pub fn size(&self) -> u32 {
        self.size_tag & TAGGED_MAX_SIZE as u32
    }
}

impl SlabNode for TaggedNode {
    #[inline(always)]
    fn new(key: u64, size: u32, meta: u32) -> TaggedNode {
        TaggedNode {
            key: [key as u32, (key >> 32) as u32],
            size_tag: size.min(TAGGED_MAX_SIZE as u32) | (meta << 30),
            prev: NIL,
            next: NIL,
        }
    }
    #[inline(always)]
    fn key(&self) -> u64 {
        self.key[0] as u64 | (self.key[1] as u64) << 32
    }
    #[inline(always)]
    fn prev(&self) -> u32 {
        self.prev
    }
    #[inline(always)]
    fn next(&self) -> u32 {
        self.next
    }
    #[inline(always)]
    fn set_prev(&mut self, v: u32) {
        self.prev = v;
    }
    #[inline(always)]
    fn set_next(&mut self, v: u32) {
        self.next = v;
    }
    #[inline(always)]
    fn set_free(&mut self, next_free: u32) {
        self.next = next_free;
    }
}

/// Mixes a key into a hash whose high bits (hashbrown's tag) and low bits
/// (its bucket) both depend on every key bit: a folded 64x64->128 multiply.
#[inline(always)]
pub(crate) fn hash_key(key: u64) -> u64 {
    let m = (key ^ 0x243f_6a88_85a3_08d3) as u128 * 0x9e37_79b9_7f4a_7c15u128;
    (m as u64) ^ ((m >> 64) as u64)
}

/// Nodes, a free list and the key index.
pub(crate) struct Slab<N = Node> {
    nodes: Vec<N>,
    free: u32,
    live: usize,
    index: HashTable<u32>,
}

impl Default for Slab<Node> {
    fn default() -> Self {
        Slab::new()
    }
}

impl Slab<Node> {
    pub fn new() -> Slab<Node> {
        Slab::empty()
    }
}

impl<N: SlabNode> Slab<N> {
    pub fn empty() -> Slab<N> {
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
            hash_key(nodes[i as usize].key())
        });
    }

    #[inline(always)]
    pub fn find(&self, key: u64) -> Option<u32> {
        let nodes = &self.nodes;
        self.index
            .find(hash_key(key), |&i| nodes[i as usize].key() == key)
            .copied()
    }

    /// Adds a node for `key` (which must not be in the index) and indexes it.
    #[inline]
    pub fn alloc(&mut self, key: u64, size: u32, meta: u32) -> u32 {
        let node = N::new(key, size, meta);
        let idx = if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next();
            self.nodes[i as usize] = node;
            i
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        let nodes = &self.nodes;
        self.index
            .insert_unique(hash_key(key), idx, |&i| hash_key(nodes[i as usize].key()));
        self.live += 1;
        idx
    }

    /// Removes `idx` from the index and returns its slot to the free list.
    /// The node must already be unlinked from any list.
    #[inline]
    pub fn release(&mut self, idx: u32) {
        let key = self.nodes[idx as usize].key();
        if let Ok(e) = self.index.find_entry(hash_key(key), |&i| i == idx) {
            e.remove();
        }
        self.nodes[idx as usize].set_free(self.free);
        self.free = idx;
        self.live -= 1;
    }

    #[inline(always)]
    pub fn get(&self, idx: u32) -> &N {
        &self.nodes[idx as usize]
    }

    #[inline(always)]
    pub fn get_mut(&mut self, idx: u32) -> &mut N {
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
        self.nodes.capacity() * std::mem::size_of::<N>()
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
    pub fn push_front<N: SlabNode>(&mut self, slab: &mut Slab<N>, idx: u32, w: u64) {
        let old = self.head;
        {
            let n = slab.get_mut(idx);
            n.set_prev(NIL);
            n.set_next(old);
        }
        if old != NIL {
            slab.get_mut(old).set_prev(idx);
        } else {
            self.tail = idx;
        }
        self.head = idx;
        self.len += 1;
        self.weight += w;
    }

    #[inline(always)]
    pub fn unlink<N: SlabNode>(&mut self, slab: &mut Slab<N>, idx: u32, w: u64) {
        let (p, n) = {
            let node = slab.get(idx);
            (node.prev(), node.next())
        };
        if p != NIL {
            slab.get_mut(p).set_next(n);
        } else {
            self.head = n;
        }
        if n != NIL {
            slab.get_mut(n).set_prev(p);
        } else {
            self.tail = p;
        }
        let node = slab.get_mut(idx);
        node.set_prev(NIL);
        node.set_next(NIL);
        self.len -= 1;
        self.weight -= w;
    }

    /// Unlinks `idx` (a plain [`Node`] charged under `unit`) and releases
    /// its slot; returns its size.
    #[inline(always)]
    pub fn remove_node(&mut self, slab: &mut Slab, idx: u32, unit: crate::Unit) -> u64 {
        let size = slab.get(idx).size as u64;
        self.unlink(slab, idx, unit.charge(size));
        slab.release(idx);
        size
    }

    #[inline(always)]
    pub fn move_to_front<N: SlabNode>(&mut self, slab: &mut Slab<N>, idx: u32) {
        if self.head == idx {
            return;
        }
        let (p, n) = {
            let node = slab.get(idx);
            (node.prev(), node.next())
        };
        // idx is not the head, so p != NIL.
        slab.get_mut(p).set_next(n);
        if n != NIL {
            slab.get_mut(n).set_prev(p);
        } else {
            self.tail = p;
        }
        let old = self.head;
        {
            let node = slab.get_mut(idx);
            node.set_prev(NIL);
            node.set_next(old);
        }
        slab.get_mut(old).set_prev(idx);
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
