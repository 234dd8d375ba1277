//! Truncated-BPTT batching: the token stream is cut into `batch_size` parallel streams that are
//! read left to right in windows of `bptt` steps, so a hidden state carries over between windows.

/// A token stream laid out as `batch_size` contiguous streams of equal length.
#[derive(Debug, Clone)]
pub struct Streams {
    /// [batch_size, stream_len] row-major
    tokens: Vec<u32>,
    batch_size: usize,
    stream_len: usize,
}

/// One training window: inputs and next-word targets, both `[batch_size, len]` row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub inputs: Vec<u32>,
    pub targets: Vec<u32>,
    pub batch_size: usize,
    pub len: usize,
}

impl Streams {
    /// Splits `tokens` into `batch_size` streams, dropping the remainder that does not divide evenly.
    /// Returns `None` when there are fewer than two tokens per stream.
    pub fn new(tokens: &[u32], batch_size: usize) -> Option<Self> {
        let batch_size = batch_size.max(1);
        let stream_len = tokens.len() / batch_size;
        if stream_len < 2 {
            return None;
        }
        Some(Streams {
            tokens: tokens[..batch_size * stream_len].to_vec(),
            batch_size,
            stream_len,
        })
    }

    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Number of predicted tokens per pass over the streams.
    pub fn num_targets(&self) -> usize {
        self.batch_size * (self.stream_len - 1)
    }

    /// The windows of one pass, each at most `bptt` steps long.
    pub fn windows(&self, bptt: usize) -> impl Iterator<Item = Window> + '_ {
        let bptt = bptt.max(1);
        (0..self.stream_len - 1).step_by(bptt).map(move |start| {
            let len = bptt.min(self.stream_len - 1 - start);
            let mut inputs = Vec::with_capacity(self.batch_size * len);
            let mut targets = Vec::with_capacity(self.batch_size * len);
            for b in 0..self.batch_size {
                let row = &self.tokens[b * self.stream_len..(b + 1) * self.stream_len];
                inputs.extend_from_slice(&row[start..start + len]);
                targets.extend_from_slice(&row[start + 1..start + 1 + len]);
            }
            Window {
                inputs,
                targets,
                batch_size: self.batch_size,
                len,
            }
        })
    }

    /// Number of windows of one pass.
    pub fn num_windows(&self, bptt: usize) -> usize {
        (self.stream_len - 1).div_ceil(bptt.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_every_target_once_in_order() {
        let tokens: Vec<u32> = (0..23).collect();
        let s = Streams::new(&tokens, 2).unwrap(); // 2 streams of 11, 1 token dropped
        let ws: Vec<Window> = s.windows(4).collect();
        assert_eq!(ws.len(), s.num_windows(4));
        assert_eq!(ws[0].inputs, vec![0, 1, 2, 3, 11, 12, 13, 14]);
        assert_eq!(ws[0].targets, vec![1, 2, 3, 4, 12, 13, 14, 15]);
        let last = ws.last().unwrap();
        assert_eq!(last.len, 2);
        assert_eq!(last.targets, vec![9, 10, 20, 21]);
        let n: usize = ws.iter().map(|w| w.targets.len()).sum();
        assert_eq!(n, s.num_targets());
        assert!(Streams::new(&[1, 2, 3], 2).is_none());
    }
}
