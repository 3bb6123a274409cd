//! Human durations on the command line and in the config file: `250ms`, `30s`, `5m`, `1h 30m`.

use std::time::Duration;

/// Parses a human duration; used as a clap value parser.
///
/// # Errors
/// A message with the rule and an example.
pub fn parse(text: &str) -> Result<Duration, String> {
    let signed: jiff::SignedDuration = text.trim().parse().map_err(|_| {
        format!("must be a duration such as 250ms, 30s, 5m or 1h 30m, got {text:?}")
    })?;
    Duration::try_from(signed).map_err(|_| format!("must not be negative, got {text:?}"))
}

/// Formats a duration the way [`parse`] reads it.
pub fn format(d: Duration) -> String {
    match jiff::SignedDuration::try_from(d) {
        Ok(signed) => format!("{signed:#}"),
        Err(_) => format!("{}s", d.as_secs()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_friendly_durations_and_refuses_the_rest() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse("5").unwrap_err().contains("30s"));
        assert!(parse("-5s").unwrap_err().contains("negative"));
        assert_eq!(
            parse(&format(Duration::from_millis(1500))),
            Ok(Duration::from_millis(1500))
        );
    }
}
