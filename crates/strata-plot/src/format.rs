//! How values are printed on axes and in tooltips.

/// How axis values are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fmt {
    /// Plain numbers (1.5, 20, 30k, 2M).
    Number,
    /// Fractions as percentages.
    Percent,
    /// Seconds as ms/s/m/h/d.
    Seconds,
    /// Bytes with binary units; a linear bytes axis puts its ticks on
    /// round multiples of KiB, MiB, GiB, ….
    Bytes,
    /// Dollars.
    Dollars,
    /// Milliseconds.
    Millis,
}

/// Escapes text for XML (element text and attribute values).
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Prints a value the way an axis of `fmt` does.
pub fn fmt_value(v: f64, fmt: Fmt) -> String {
    match fmt {
        Fmt::Percent => {
            let p = v * 100.0;
            if (p - p.round()).abs() < 1e-6 {
                format!("{p:.0}%")
            } else {
                format!("{p:.1}%")
            }
        }
        Fmt::Seconds => {
            let (n, u) = if v < 1.0 {
                (v * 1e3, "ms")
            } else if v < 60.0 {
                (v, "s")
            } else if v < 3600.0 {
                (v / 60.0, "m")
            } else if v < 86400.0 {
                (v / 3600.0, "h")
            } else {
                (v / 86400.0, "d")
            };
            format!("{}{u}", trim(n))
        }
        Fmt::Bytes => {
            const U: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
            let mut x = v;
            let mut i = 0;
            while x.abs() >= 1024.0 && i + 1 < U.len() {
                x /= 1024.0;
                i += 1;
            }
            format!("{} {}", trim(x), U[i])
        }
        Fmt::Dollars => format!("${}", short_num(v)),
        Fmt::Millis => format!("{} ms", trim(v)),
        Fmt::Number => short_num(v),
    }
}

/// A number with about three significant digits and no trailing zeros.
pub(crate) fn trim(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.1e}")
    };
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn short_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{}G", trim(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fmt_value(0.25, Fmt::Percent), "25%");
        assert_eq!(fmt_value(0.125, Fmt::Percent), "12.5%");
        assert_eq!(fmt_value(3600.0, Fmt::Seconds), "1h");
        assert_eq!(fmt_value(90.0, Fmt::Seconds), "1.5m");
        assert_eq!(fmt_value(0.002, Fmt::Seconds), "2ms");
        assert_eq!(fmt_value(1048576.0, Fmt::Bytes), "1 MiB");
        assert_eq!(fmt_value(1536.0, Fmt::Bytes), "1.5 KiB");
        assert_eq!(fmt_value(2500.0, Fmt::Dollars), "$2500");
        assert_eq!(fmt_value(25000.0, Fmt::Number), "25k");
        assert_eq!(fmt_value(2.5e6, Fmt::Number), "2.5M");
        assert_eq!(fmt_value(0.2, Fmt::Number), "0.2");
        assert_eq!(fmt_value(0.0, Fmt::Number), "0");
        assert_eq!(esc(r#"a<b>&"c""#), "a&lt;b&gt;&amp;&quot;c&quot;");
    }
}
