//! ISO 8601 durations (`PT10S`, `P7D`, `P1DT2H`), repeating intervals
//! (`R5/PT10S`, `R/PT1H`) and instants (RFC 3339), as BPMN timers and retry
//! cycles write them.

use crate::clock::Millis;

/// A duration in milliseconds. Years and months count as 365 and 30 days.
pub fn duration(s: &str) -> Result<Millis, String> {
    let t = s.trim();
    let body = t
        .strip_prefix('P')
        .ok_or_else(|| format!("'{s}' is not an ISO 8601 duration (PT10S, P7D, ...)"))?;
    let (date, time) = match body.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (body, None),
    };
    let mut total: f64 = 0.0;
    let mut any = false;
    let mut part = |text: &str, units: &[(char, f64)]| -> Result<(), String> {
        let mut num = String::new();
        for c in text.chars() {
            if c.is_ascii_digit() || c == '.' || c == ',' {
                num.push(if c == ',' { '.' } else { c });
                continue;
            }
            let unit = units
                .iter()
                .find(|(u, _)| *u == c)
                .ok_or_else(|| format!("'{s}': unexpected '{c}'"))?;
            let n: f64 = num
                .parse()
                .map_err(|_| format!("'{s}': missing number before '{c}'"))?;
            total += n * unit.1;
            any = true;
            num.clear();
        }
        if num.is_empty() {
            Ok(())
        } else {
            Err(format!("'{s}': number without unit"))
        }
    };
    const DAY: f64 = 86_400_000.0;
    part(
        date,
        &[
            ('Y', 365.0 * DAY),
            ('M', 30.0 * DAY),
            ('W', 7.0 * DAY),
            ('D', DAY),
        ],
    )?;
    if let Some(time) = time {
        part(time, &[('H', 3_600_000.0), ('M', 60_000.0), ('S', 1000.0)])?;
    }
    if !any {
        return Err(format!("'{s}' is an empty duration"));
    }
    let max = crate::limits::TIMER.max;
    if !total.is_finite() || total > max as f64 {
        return Err(format!(
            "'{s}' is longer than a timer may be ({})",
            crate::limits::TIMER.range()
        ));
    }
    Ok(total.round() as Millis)
}

/// A repeating interval `R[n]/duration`: (repetitions or unbounded, interval).
pub fn cycle(s: &str) -> Result<(Option<u32>, Millis), String> {
    let t = s.trim();
    let rest = t
        .strip_prefix('R')
        .ok_or_else(|| format!("'{s}' is not a repeating interval like R5/PT10S"))?;
    let (n, d) = rest
        .split_once('/')
        .ok_or_else(|| format!("'{s}' is not a repeating interval like R5/PT10S"))?;
    let reps = if n.is_empty() {
        None
    } else {
        Some(
            n.parse()
                .map_err(|_| format!("'{s}': bad repetition count"))?,
        )
    };
    Ok((reps, duration(d)?))
}

/// An RFC 3339 instant in milliseconds since the epoch.
pub fn instant(s: &str) -> Result<Millis, String> {
    // every form RFC 3339 allows (a numeric offset such as +01:00, `z`, a
    // lower-case `t`), and without an offset the UTC instant as before
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s.trim()) {
        let ms = t.timestamp_millis();
        return Millis::try_from(ms)
            .map_err(|_| format!("'{s}' is before 1970"))
            .and_then(|ms| {
                crate::limits::check_instant("timeDate", ms)
                    .map_err(|_| format!("'{s}' is after 9999-12-31"))
            });
    }
    let t = humantime::parse_rfc3339_weak(s.trim())
        .map_err(|e| format!("'{s}' is not an RFC 3339 date: {e}"))?;
    let ms = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| format!("'{s}' is before 1970"))?
        .as_millis();
    Millis::try_from(ms)
        .ok()
        .and_then(|ms| crate::limits::check_instant("timeDate", ms).ok())
        .ok_or_else(|| format!("'{s}' is after 9999-12-31"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_take_every_offset_rfc_3339_allows() {
        let utc = instant("2026-12-31T09:00:00Z").unwrap();
        assert_eq!(instant("2026-12-31T10:00:00+01:00"), Ok(utc));
        assert_eq!(instant("2026-12-31T04:30:00-04:30"), Ok(utc));
        assert_eq!(instant("2026-12-31t09:00:00z"), Ok(utc));
        assert_eq!(instant("2026-12-31T09:00:00.250+00:00"), Ok(utc + 250));
        assert_eq!(instant("2026-12-31T09:00:00"), Ok(utc), "no offset: UTC");
        assert!(
            instant("1970-01-01T00:30:00+01:00")
                .unwrap_err()
                .contains("before 1970")
        );
        assert!(instant("2026-12-31T10:00:00+25:00").is_err());
        assert!(instant("morgen").is_err());
    }

    #[test]
    fn durations_cycles_and_instants() {
        assert_eq!(duration("PT10S"), Ok(10_000));
        assert_eq!(duration("P7D"), Ok(7 * 86_400_000));
        assert_eq!(
            duration("P1DT2H30M"),
            Ok(86_400_000 + 2 * 3_600_000 + 30 * 60_000)
        );
        assert_eq!(duration("PT0.5S"), Ok(500));
        assert_eq!(duration("P2W"), Ok(14 * 86_400_000));
        assert!(duration("10S").is_err());
        assert!(duration("P").is_err());
        assert!(duration("PT5").is_err());
        assert!(duration("PTXS").is_err());
        assert_eq!(cycle("R5/PT10S"), Ok((Some(5), 10_000)));
        assert_eq!(cycle("R/PT1H"), Ok((None, 3_600_000)));
        assert!(cycle("5/PT1S").is_err());
        assert_eq!(instant("2026-01-01T00:00:00Z"), Ok(1_767_225_600_000));
        assert!(instant("tomorrow").is_err());
        assert!(duration("P10000Y").is_err(), "longer than any timer");
        assert!(duration("P99999999999999999999Y").is_err());
        assert!(cycle("R/P1000Y").is_err());
    }
}
