//! A regular grid of measured values and its interpolation.
//!
//! Operator timings grow roughly as powers of their sizes (a GEMM's time is linear in its
//! tokens once compute-bound, flat while it is launch- or bandwidth-bound), so the grid is
//! interpolated multilinearly in log(axis) and log(value): a straight line between two
//! measured shapes on a log-log plot. Outside the measured range a value is extrapolated from
//! the two edge points of that axis, never with a falling slope (a larger problem never runs
//! faster), and below the smallest measured size it is held at the edge (tiny problems are
//! launch-bound: their time does not shrink further).

/// One axis: its values, ascending, and their logarithms.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub values: Vec<f64>,
    logs: Vec<f64>,
}

impl Axis {
    /// `None` unless `values` are positive, finite and strictly ascending.
    pub fn new(values: Vec<f64>) -> Option<Axis> {
        let ok = !values.is_empty()
            && values.iter().all(|v| v.is_finite() && *v > 0.0)
            && values.windows(2).all(|pair| pair[0] < pair[1]);
        ok.then(|| Axis {
            logs: values.iter().map(|v| v.ln()).collect(),
            values,
        })
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The cell `x` falls in, as (lower index, weight of the upper point) in log space. The
    /// weight is above 1 past the last point (extrapolation) and 0 below the first.
    fn locate(&self, x: f64) -> (usize, f64) {
        let n = self.logs.len();
        if n == 1 {
            return (0, 0.0);
        }
        let lx = x.max(f64::MIN_POSITIVE).ln();
        if lx <= self.logs[0] {
            return (0, 0.0);
        }
        let upper = self.logs.partition_point(|&v| v < lx).min(n - 1).max(1);
        let lower = upper - 1;
        let weight = (lx - self.logs[lower]) / (self.logs[upper] - self.logs[lower]);
        (lower, weight)
    }
}

/// Values on the product of its axes, stored row-major (the last axis varies fastest), as
/// logarithms.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub axes: Vec<Axis>,
    logs: Vec<f64>,
}

impl Grid {
    /// `None` unless there is one positive value per grid point.
    pub fn new(axes: Vec<Axis>, values: &[f64]) -> Option<Grid> {
        let size: usize = axes.iter().map(Axis::len).product();
        let ok = !axes.is_empty()
            && size == values.len()
            && values.iter().all(|v| v.is_finite() && *v > 0.0);
        ok.then(|| Grid {
            logs: values.iter().map(|v| v.ln()).collect(),
            axes,
        })
    }

    /// The interpolated value at `point` (one coordinate per axis).
    pub fn at(&self, point: &[f64]) -> f64 {
        // At most 3 axes here; a fixed array keeps the lookup free of allocation.
        let mut cells = [(0usize, 0.0f64); 4];
        let dims = self.axes.len().min(cells.len());
        for (d, cell) in cells.iter_mut().enumerate().take(dims) {
            *cell = self.axes[d].locate(point.get(d).copied().unwrap_or(1.0));
        }
        let mut total = 0.0;
        for corner in 0..(1usize << dims) {
            let mut weight = 1.0;
            let mut index = 0usize;
            for (d, &(lower, w)) in cells.iter().enumerate().take(dims) {
                let upper = corner >> (dims - 1 - d) & 1 == 1;
                let n = self.axes[d].len();
                let (i, f) = if n == 1 {
                    (0, if upper { 0.0 } else { 1.0 })
                } else if upper {
                    (lower + 1, w)
                } else {
                    (lower, 1.0 - w)
                };
                weight *= f;
                index = index * n + i;
            }
            if weight != 0.0 {
                total += weight * self.logs[index];
            }
        }
        total.exp()
    }

    /// The value at `point`, with extrapolation beyond an axis's end made non-decreasing: the
    /// value at the nearest edge if interpolation along that axis would make it fall.
    pub fn at_monotone(&self, point: &[f64]) -> f64 {
        let value = self.at(point);
        let mut edge = [0.0f64; 4];
        let mut clamped = false;
        for (d, axis) in self.axes.iter().enumerate().take(edge.len()) {
            let x = point.get(d).copied().unwrap_or(1.0);
            let last = axis.values[axis.len() - 1];
            edge[d] = if x > last {
                clamped = true;
                last
            } else {
                x
            };
        }
        if clamped {
            value.max(self.at(&edge[..self.axes.len().min(edge.len())]))
        } else {
            value
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(values: &[f64]) -> Axis {
        Axis::new(values.to_vec()).unwrap()
    }

    #[test]
    fn grid_points_come_back_exactly() {
        let grid = Grid::new(
            vec![axis(&[1.0, 2.0, 4.0]), axis(&[10.0, 100.0])],
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        )
        .unwrap();
        for (i, x) in [1.0, 2.0, 4.0].iter().enumerate() {
            for (j, y) in [10.0, 100.0].iter().enumerate() {
                let expected = (i * 2 + j + 1) as f64;
                assert!((grid.at(&[*x, *y]) - expected).abs() < 1e-9, "{x} {y}");
            }
        }
    }

    #[test]
    fn power_laws_interpolate_exactly_in_log_space() {
        // v = 3·x²: a line in log-log, so any point between is exact.
        let xs = [1.0, 4.0, 16.0];
        let grid = Grid::new(vec![axis(&xs)], &xs.map(|x| 3.0 * x * x)).unwrap();
        assert!((grid.at(&[2.0]) - 12.0).abs() < 1e-9);
        assert!((grid.at(&[10.0]) - 300.0).abs() < 1e-6);
        // Extrapolated along the last segment above the range...
        assert!((grid.at(&[64.0]) - 3.0 * 64.0 * 64.0).abs() < 1e-6);
        // ...and held at the edge below it.
        assert!((grid.at(&[0.5]) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn extrapolation_never_falls() {
        let grid = Grid::new(vec![axis(&[1.0, 2.0])], &[10.0, 8.0]).unwrap();
        assert!(
            grid.at(&[8.0]) < 8.0,
            "plain extrapolation follows the slope down"
        );
        assert!((grid.at_monotone(&[8.0]) - 8.0).abs() < 1e-9);
        assert!((grid.at_monotone(&[1.5]) - grid.at(&[1.5])).abs() < 1e-12);
    }

    #[test]
    fn bad_axes_and_values_are_refused() {
        assert!(Axis::new(vec![2.0, 1.0]).is_none());
        assert!(Axis::new(vec![0.0, 1.0]).is_none());
        assert!(Axis::new(vec![]).is_none());
        assert!(Grid::new(vec![axis(&[1.0, 2.0])], &[1.0]).is_none());
        assert!(Grid::new(vec![axis(&[1.0, 2.0])], &[1.0, -1.0]).is_none());
    }
}
