//! The allocations Janus is compared with (§8.5): a single FIFO (one
//! eviction TTL for every workload), flash proportional to read rate, and
//! flash proportional to size. All write every new byte (probability 1).

use crate::curve::CacheabilityCurve;

/// The single-FIFO allocation: the TTL `T` at which the youngest data of
/// every workload together fills the flash, `Σ f_i(T) = F`, and each
/// workload's share `f_i(T)`. Returns `(T, shares)`; `T` is `None` when the
/// flash holds every workload whole.
pub fn single_ttl(curves: &[&CacheabilityCurve], flash: f64) -> (Option<f64>, Vec<f64>) {
    let total: f64 = curves.iter().map(|c| c.size()).sum();
    if flash >= total {
        return (None, curves.iter().map(|c| c.size()).collect());
    }
    let fill = |t: f64| curves.iter().map(|c| c.bytes_at_age(t)).sum::<f64>();
    let mut hi = curves
        .iter()
        .flat_map(|c| c.age.iter().copied().filter(|a| a.is_finite()))
        .fold(1.0, f64::max);
    let mut lo = 0.0;
    if fill(hi) <= flash {
        // The flash holds everything of finite age: the rest is data of
        // unbounded age, which a TTL never reaches.
        return (
            Some(hi),
            curves.iter().map(|c| c.bytes_at_age(hi)).collect(),
        );
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if fill(mid) <= flash {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-12 * hi {
            break;
        }
    }
    (
        Some(lo),
        curves.iter().map(|c| c.bytes_at_age(lo)).collect(),
    )
}

/// Flash proportional to `key` (read rates or sizes), each share capped at
/// the workload's size `caps[i]`, with what a cap frees handed to the
/// others in the same proportion (water-filling).
pub fn proportional(key: &[f64], caps: &[f64], flash: f64) -> Vec<f64> {
    let n = key.len();
    let mut x = vec![0.0; n];
    let mut open: Vec<usize> = (0..n).filter(|&i| key[i] > 0.0 && caps[i] > 0.0).collect();
    let mut left = flash;
    while !open.is_empty() && left > 0.0 {
        let sum: f64 = open.iter().map(|&i| key[i]).sum();
        let mut capped = false;
        for &i in &open {
            if x[i] + left * key[i] / sum >= caps[i] {
                capped = true;
            }
        }
        if !capped {
            for &i in &open {
                x[i] += left * key[i] / sum;
            }
            break;
        }
        // Fill the capped ones, then share the rest again.
        let mut next = Vec::with_capacity(open.len());
        let share = left;
        for &i in &open {
            if x[i] + share * key[i] / sum >= caps[i] {
                left -= caps[i] - x[i];
                x[i] = caps[i];
            } else {
                next.push(i);
            }
        }
        open = next;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proportional_water_fills() {
        let x = proportional(&[1.0, 1.0, 2.0], &[10.0, 100.0, 100.0], 100.0);
        assert_eq!(x[0], 10.0);
        assert!(
            (x[1] - 30.0).abs() < 1e-9 && (x[2] - 60.0).abs() < 1e-9,
            "{x:?}"
        );
        let all = proportional(&[1.0, 1.0], &[10.0, 20.0], 100.0);
        assert_eq!(all, vec![10.0, 20.0]);
    }

    #[test]
    fn single_ttl_equalises_age() {
        let mut a = CacheabilityCurve::from_points(vec![0.0, 100.0], vec![0.0, 10.0]).unwrap();
        a.age = vec![0.0, 100.0]; // 1 byte per second of age
        let mut b = CacheabilityCurve::from_points(vec![0.0, 300.0], vec![0.0, 10.0]).unwrap();
        b.age = vec![0.0, 100.0]; // 3 bytes per second of age
        let (t, x) = single_ttl(&[&a, &b], 200.0);
        let t = t.unwrap();
        assert!((t - 50.0).abs() < 1e-6, "{t}");
        assert!((x[0] - 50.0).abs() < 1e-6 && (x[1] - 150.0).abs() < 1e-6);
        let (t, x) = single_ttl(&[&a, &b], 1000.0);
        assert_eq!(t, None);
        assert_eq!(x, vec![100.0, 300.0]);
    }
}
