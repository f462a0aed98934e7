//! Numbers said in words where the app waits: a duration, the time a run has left.

/// The time a run has left at the pace so far (`elapsed_s` since Start, `done` of `n`
/// steps), in words; None before the second step (the first holds the start-up) or when
/// paused at the end.
pub fn time_left(elapsed_s: f64, done: usize, n: usize) -> Option<String> {
    if done < 2 || done >= n || !elapsed_s.is_finite() {
        return None;
    }
    Some(duration_words(elapsed_s / done as f64 * (n - done) as f64))
}

/// A duration in words: `45 s`, `3 min 05 s`, `2 h 10 min`.
pub fn duration_words(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_reads_as_words_at_the_pace_so_far() {
        // 10 of 100 steps in 20 s: 180 s to go.
        assert_eq!(time_left(20.0, 10, 100).as_deref(), Some("3 min 00 s"));
        assert_eq!(time_left(5.0, 10, 20).as_deref(), Some("5 s"));
        assert_eq!(time_left(3600.0, 10, 30).as_deref(), Some("2 h 00 min"));
        // Before the second step, at the end, and with no clock: nothing said.
        assert_eq!(time_left(20.0, 1, 100), None);
        assert_eq!(time_left(20.0, 100, 100), None);
        assert_eq!(time_left(f64::NAN, 10, 100), None);
        assert_eq!(duration_words(-3.0), "0 s");
        assert_eq!(duration_words(61.4), "1 min 01 s");
    }
}
