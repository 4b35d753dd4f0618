//! A fuzzer's byte string read as a stream of choices: every read succeeds (zeros once the
//! bytes run out), so any input decodes to some valid sequence of decisions and small
//! mutations of the bytes give small changes of the structure.

/// Choices drawn from bytes.
#[derive(Clone, Debug)]
pub struct Source<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Source<'a> {
    /// Reads `data` from the start.
    pub fn new(data: &'a [u8]) -> Source<'a> {
        Source { data, pos: 0 }
    }

    /// The next byte, 0 when exhausted.
    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// True once every byte has been read.
    pub fn exhausted(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Uniform-ish in `0..n` (0 for `n <= 1`): one byte for small `n`, two otherwise.
    pub fn below(&mut self, n: usize) -> usize {
        match n {
            0 | 1 => 0,
            2..=256 => self.byte() as usize % n,
            _ => u16::from_le_bytes([self.byte(), self.byte()]) as usize % n,
        }
    }

    /// In `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// A coin.
    pub fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// One of `items` (which must not be empty).
    pub fn pick<'b, T>(&mut self, items: &'b [T]) -> &'b T {
        &items[self.below(items.len())]
    }

    /// Eight bytes as a seed (never 0, for xorshift).
    pub fn seed(&mut self) -> u64 {
        let mut s = 0u64;
        for _ in 0..8 {
            s = (s << 8) | self.byte() as u64;
        }
        s | 1
    }
}

/// Seeded xorshift for tensor data (kept apart from the structure's bytes).
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `[lo, hi)`.
    pub fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    /// `n` values uniform in `[lo, hi)`.
    pub fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32(lo, hi)).collect()
    }
}
