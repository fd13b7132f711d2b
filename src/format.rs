//! Formatting of figures for people: durations, sizes, large counts. Shared by the hazards'
//! explanations and every renderer, so one figure reads the same everywhere.

/// Formats a duration in ns with a unit that suits it.
pub fn human_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.1} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

/// A count with its noun: `1 figure`, `7 figures`.
pub fn count_of(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A fraction as a percentage with `decimals` digits after the point: `pct(0.1234, 1)` is
/// `12.3%`. The one percentage printer of every view.
pub fn pct(fraction: f64, decimals: usize) -> String {
    format!("{:.*}%", decimals, fraction * 100.0)
}

/// A size the kernel gives in KiB (`/proc`'s `kB`), as [`human_bytes`] says it: `512 MiB`,
/// `132 KiB`, `1.53 MiB`; nothing rounds to 0.
pub fn human_kib(kib: u64) -> String {
    human_bytes(kib.saturating_mul(1024))
}

/// Bytes in the largest binary unit they reach: whole when exact (`16 KiB`, `1 GiB`), else
/// two decimals (`1.50 MiB`), so a size one byte off a round one never prints as round.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let power = UNITS
        .iter()
        .enumerate()
        .rev()
        .find(|(i, _)| b >> (10 * i) > 0)
        .map_or(0, |(i, _)| i);
    let unit = 1u64 << (10 * power);
    if b.is_multiple_of(unit) {
        format!("{} {}", b / unit, UNITS[power])
    } else {
        format!("{:.2} {}", b as f64 / unit as f64, UNITS[power])
    }
}

/// An integer with thousands separators: 4920500 -> `4,920,500`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A metric's value with its unit, at a precision that suits it: sizes as KiB/MiB, ratios
/// with an `x`, other figures to three significant digits (at least one decimal below 100).
pub fn human_value(value: f64, unit: &str) -> String {
    value_with_extra_decimals(value, unit, 0)
}

/// [`human_value`] with `extra` more decimals than it would show (bytes stay whole).
fn value_with_extra_decimals(value: f64, unit: &str, extra: usize) -> String {
    if !value.is_finite() {
        return format!("{value} {unit}");
    }
    match unit {
        "bytes" if value >= 0.0 && value.fract() == 0.0 => human_bytes(value as u64),
        "ratio" => format!("{value:.digits$}x", digits = 2 + extra),
        _ => {
            let digits = if value.abs() >= 100.0 {
                0
            } else if value.abs() >= 10.0 {
                1
            } else {
                2
            } + extra;
            format!("{value:.digits$} {unit}")
        }
    }
}

/// A confidence interval as a reader sees it: `95% CI 24.08-24.12 ns`.
///
/// One level is printed everywhere: an interval whose `coverage` reaches `nominal` is called by
/// the nominal level (the order-statistic interval of 9 samples covers 96.1%, of 5 only
/// 93.8%), and one that falls short says how many values it rests on and the level it
/// reached (`n=3: 75% CI ...`, three runs of `--runs 3`). Ends that would print alike get
/// more decimals, so the interval is never shown as a `±` (which means a spread elsewhere).
pub fn interval_words(
    low: f64,
    high: f64,
    unit: &str,
    coverage: f64,
    nominal: f64,
    n: Option<usize>,
) -> String {
    // The achieved coverage is stored rounded through JSON: allow a hair below nominal.
    let label = if coverage >= nominal - 1e-9 {
        format!("{} CI", pct(nominal, 0))
    } else {
        match n {
            Some(n) => format!("n={n}: {} CI", pct(coverage, 0)),
            None => format!("{} CI", pct(coverage, 0)),
        }
    };
    // Durations in the unit `human_ns` gives the figure they follow (`1.2 us (95% CI
    // 1.19-1.30 us)`, not `1189-1303 ns`).
    let (low, high, unit) = match unit {
        "ns" if low.abs() >= 1e6 => (low / 1e6, high / 1e6, "ms"),
        "ns" if low.abs() >= 1e3 => (low / 1e3, high / 1e3, "us"),
        _ => (low, high, unit),
    };
    let (mut lo, mut hi) = (human_value(low, unit), human_value(high, unit));
    for extra in 1..=3 {
        if lo != hi || low == high {
            break;
        }
        lo = value_with_extra_decimals(low, unit, extra);
        hi = value_with_extra_decimals(high, unit, extra);
    }
    // `121-131 cycles` rather than `121 cycles to 131 cycles` when both ends share a unit.
    let range = match (lo.rsplit_once(' '), hi.rsplit_once(' ')) {
        (Some((a, ua)), Some((b, ub))) if ua == ub => format!("{a}-{b} {ub}"),
        // Ratios read `3.21x`: `3.21-3.31x`.
        (None, None) if lo.ends_with('x') && hi.ends_with('x') => {
            format!("{}-{hi}", lo.trim_end_matches('x'))
        }
        _ => format!("{lo} to {hi}"),
    };
    format!("{label} {range}")
}

/// Parses a size: a number of bytes, or with a binary suffix `K`, `M`, `G`, `T` (also `KB`,
/// `KiB`, ...; case-insensitive). `16K` is 16384. `None` for anything else or zero.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift).filter(|&v| v > 0)
}

/// Parses a number above 0 and at most `max` (a duration, a cost): what a numeric option
/// takes. The error names the range: `must be above 0 and at most 86400, got 1e30`. NaN,
/// infinities, 0, negatives and anything beyond `max` are refused, so later arithmetic (a
/// `Duration`, a product with a count) cannot overflow or panic.
pub fn parse_positive_at_most(text: &str, max: f64) -> Result<f64, String> {
    let range = || {
        format!(
            "must be a number above 0 and at most {max}, got {}",
            text.trim()
        )
    };
    let v: f64 = text.trim().parse().map_err(|_| range())?;
    if v.is_finite() && v > 0.0 && v <= max {
        Ok(v)
    } else {
        Err(range())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_outside_their_range_are_refused_with_the_range() {
        assert_eq!(parse_positive_at_most("43", 1e4), Ok(43.0));
        assert_eq!(parse_positive_at_most(" 0.5 ", 1e4), Ok(0.5));
        assert_eq!(parse_positive_at_most("86400", 86400.0), Ok(86400.0));
        for bad in [
            "0",
            "-1",
            "1e30",
            "NaN",
            "inf",
            "-inf",
            "",
            "x",
            "18446744073709551615",
        ] {
            let e = parse_positive_at_most(bad, 86400.0).unwrap_err();
            assert!(e.contains("above 0 and at most 86400"), "{bad}: {e}");
        }
    }

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("16K"), Some(16384));
        assert_eq!(parse_size("16KiB"), Some(16384));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("512MB"), Some(512 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("1.5G"), None);
        assert_eq!(parse_size("12 parsecs"), None);
        assert_eq!(parse_size("99999999999T"), None);
    }

    #[test]
    fn bytes_are_whole_when_exact_and_two_decimals_otherwise() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(16384), "16 KiB");
        // Regression: 1.5 KiB printed as "1 KiB" and 1.5 GiB as "1536.00 MiB"; the buffer
        // notes printed the same sizes as "1.5 MiB" where the tables said "1.50 MiB".
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(human_bytes(3 << 19), "1.50 MiB");
        assert_eq!(human_bytes(3 << 29), "1.50 GiB");
        assert_eq!(human_bytes((1 << 20) + 1), "1.00 MiB");
        assert_eq!(human_bytes(1 << 30), "1 GiB");
        assert_eq!(human_bytes(2 << 40), "2 TiB");
    }

    use super::*;

    #[test]
    fn durations_pick_a_unit() {
        assert_eq!(human_ns(24.37), "24.4 ns");
        assert_eq!(human_ns(2_400.0), "2.4 us");
        assert_eq!(human_ns(19_682_000.0), "19.7 ms");
    }

    #[test]
    fn bytes_are_human_and_never_round_a_difference_away() {
        assert_eq!(human_bytes(32 << 10), "32 KiB");
        assert_eq!(human_bytes(32 << 20), "32 MiB");
        assert_eq!(human_bytes(1 << 30), "1 GiB");
        assert_eq!(human_bytes(100), "100 B");
        // A 1.25 MiB L2 must not read as 1 MiB.
        assert_eq!(human_bytes(1280 << 10), "1.25 MiB");
    }

    #[test]
    fn intervals_say_the_nominal_level_or_n_and_the_level_reached() {
        // Nine samples: the order-statistic interval covers 96.1%, printed as the 95% it is.
        assert_eq!(
            interval_words(98.0, 112.0, "cycles", 0.961, 0.95, Some(9)),
            "95% CI 98.0-112 cycles"
        );
        // Three runs reach 75%: said, with n.
        assert_eq!(
            interval_words(38.7, 39.0, "cycles", 0.75, 0.95, Some(3)),
            "n=3: 75% CI 38.7-39.0 cycles"
        );
        assert_eq!(
            interval_words(3.01, 8.19, "ratio", 0.961, 0.95, Some(9)),
            "95% CI 3.01-8.19x"
        );
        // In the unit the figure is shown in: `1.2 us (95% CI 1.19-1.30 us)`.
        assert_eq!(
            interval_words(1189.0, 1303.0, "ns", 0.961, 0.95, Some(9)),
            "95% CI 1.19-1.30 us"
        );
    }

    #[test]
    fn an_interval_narrower_than_the_digits_shown_gets_more_digits_never_a_plus_minus() {
        // Regression: the PAUSE interval printed "96% CI ±0.1%", where "±" means a spread in
        // `diff` and the tables.
        assert_eq!(
            interval_words(24.08, 24.12, "ns", 0.961, 0.95, Some(9)),
            "95% CI 24.08-24.12 ns"
        );
        assert_eq!(
            interval_words(77.51, 77.53, "cycles", 0.961, 0.95, Some(9)),
            "95% CI 77.51-77.53 cycles"
        );
    }

    #[test]
    fn values_read_in_their_unit() {
        assert_eq!(human_value(8_388_608.0, "bytes"), "8 MiB");
        assert_eq!(human_value(35.514, "ratio"), "35.51x");
        assert_eq!(human_value(1081.86, "ns"), "1082 ns");
        assert_eq!(human_value(24.37, "ns"), "24.4 ns");
        assert_eq!(human_value(1.088, "ns"), "1.09 ns");
        assert_eq!(human_value(10.93, "GB/s"), "10.9 GB/s");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands(4_920_500), "4,920,500");
        assert_eq!(group_thousands(328_050), "328,050");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(0), "0");
    }
}
