//! The matrix products of the fused ops: a safe face on the `gemm` crate, with strided operands
//! (a transpose is a view, never a copy) and AVX-512 kernels where the CPU has them.

/// A read-only strided matrix: element `(i, j)` is `data[offset + i·rs + j·cs]`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub data: &'a [f32],
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub rs: usize,
    pub cs: usize,
}

impl<'a> MatRef<'a> {
    /// A contiguous row-major `[rows, cols]` matrix.
    pub fn rows(data: &'a [f32], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            offset: 0,
            rows,
            cols,
            rs: cols,
            cs: 1,
        }
    }

    /// The transpose, as a view.
    pub fn t(self) -> Self {
        MatRef {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }

    /// Panics unless every element lies inside `data` (what makes the raw-pointer call sound).
    fn check(&self) {
        if self.rows == 0 || self.cols == 0 {
            return;
        }
        let last = self.offset + (self.rows - 1) * self.rs + (self.cols - 1) * self.cs;
        assert!(
            last < self.data.len(),
            "matrix view [{}, {}] (strides {}, {}, offset {}) overruns its {} values",
            self.rows,
            self.cols,
            self.rs,
            self.cs,
            self.offset,
            self.data.len()
        );
    }
}

/// Products below this many multiply-adds run on one thread: splitting them costs more than it saves.
const PARALLEL_MIN: usize = 1 << 22;

/// `c = a · b` (or `c += a · b` when `accumulate`), `c` row-major with `ldc` values per row.
/// Large products use up to `rayon::current_num_threads()` threads.
pub fn matmul(c: &mut [f32], ldc: usize, a: MatRef, b: MatRef, accumulate: bool) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(
        b.rows, k,
        "matmul: inner dimensions {k} and {} differ",
        b.rows
    );
    a.check();
    b.check();
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        ldc >= n && (m - 1) * ldc + n <= c.len(),
        "matmul: output of {} values cannot hold [{m}, {n}] with row stride {ldc}",
        c.len()
    );
    if k == 0 {
        if !accumulate {
            for row in c.chunks_mut(ldc).take(m) {
                row[..n].fill(0.0);
            }
        }
        return;
    }
    let threads = rayon::current_num_threads();
    let parallelism = if threads > 1 && m * n * k >= PARALLEL_MIN {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: all three views were bounds-checked above, `c` is borrowed mutably and the inputs
    // immutably, so they cannot overlap.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            ldc as isize,
            accumulate,
            a.data.as_ptr().add(a.offset),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr().add(b.offset),
            b.cs as isize,
            b.rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: MatRef, b: MatRef) -> Vec<f32> {
        let mut c = vec![0.0; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                c[i * b.cols + j] = (0..a.cols)
                    .map(|p| {
                        a.data[a.offset + i * a.rs + p * a.cs]
                            * b.data[b.offset + p * b.rs + j * b.cs]
                    })
                    .sum();
            }
        }
        c
    }

    #[test]
    fn strided_products_match_the_definition() {
        let x = fastsoftmax_infer::kernels::seeded_values(7 * 5, 1);
        let y = fastsoftmax_infer::kernels::seeded_values(5 * 3, 2);
        let (a, b) = (MatRef::rows(&x, 7, 5), MatRef::rows(&y, 5, 3));
        for (a, b) in [(a, b), (a.t().t(), b), (MatRef::rows(&x, 5, 7).t(), b)] {
            let mut c = vec![1.0; 7 * 3];
            matmul(&mut c, 3, a, b, false);
            let want = naive(a, b);
            for (g, w) in c.iter().zip(&want) {
                assert!((g - w).abs() < 1e-5, "{g} vs {w}");
            }
            matmul(&mut c, 3, a, b, true);
            for (g, w) in c.iter().zip(&want) {
                assert!((g - 2.0 * w).abs() < 1e-5);
            }
        }
    }

    #[test]
    #[should_panic(expected = "overruns")]
    fn a_view_past_its_data_is_refused() {
        let x = vec![0.0; 10];
        let mut c = vec![0.0; 4];
        matmul(
            &mut c,
            2,
            MatRef::rows(&x, 2, 6),
            MatRef::rows(&x, 6, 2),
            false,
        );
    }
}
