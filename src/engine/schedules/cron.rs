//! Cron expressions read in an IANA time zone, with croner: five fields (minute hour
//! day-of-month month day-of-week) or six with a leading seconds field; `L`, `W` and `#`
//! forms; day-of-month and day-of-week both given match when either does (as Vixie cron).
//!
//! Daylight saving time, as croner resolves it:
//! - a time in a skipped hour (clocks forward): a fixed-time expression (`30 2 * * *`)
//!   fires at the first instant after the gap, once, that day; an interval or wildcard
//!   expression (`*/15 * * * *`) skips the times that do not exist.
//! - a repeated hour (clocks back): a fixed-time expression fires once, at the first pass;
//!   an interval or wildcard expression fires in both passes.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::model::FieldError;

/// How many occurrences ahead the minimum interval is checked over.
const INTERVAL_SAMPLES: usize = 500;

/// A parsed expression in its time zone.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    cron: Cron,
    zone: Tz,
}

impl CronSchedule {
    /// Parses `expression` in `zone`, naming the field that is wrong.
    pub fn parse(expression: &str, zone: &str) -> Result<CronSchedule, FieldError> {
        let zone = Tz::from_str(zone).map_err(|_| {
            FieldError::new(
                "time_zone",
                format!("`{zone}` is not an IANA time zone (such as `Europe/Paris` or `UTC`)"),
            )
        })?;
        if expression.trim().starts_with('@') {
            return Err(FieldError::new(
                "cron",
                "write the fields (`0 0 * * *`), not a nickname",
            ));
        }
        let fields = expression.split_whitespace().count();
        if !(5..=6).contains(&fields) {
            return Err(FieldError::new(
                "cron",
                format!(
                    "has {fields} fields: write five (minute hour day-of-month month \
                     day-of-week), or six with a leading seconds field"
                ),
            ));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(expression)
            .map_err(|e| FieldError::new("cron", format!("is not a valid expression: {e}")))?;
        Ok(CronSchedule { cron, zone })
    }

    /// The first occurrence strictly after `after`, if there is one.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.zone);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|next| next.with_timezone(&Utc))
    }

    /// The first occurrence at or after `from`.
    pub fn next_from(&self, from: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = from.with_timezone(&self.zone);
        self.cron
            .find_next_occurrence(&local, true)
            .ok()
            .map(|next| next.with_timezone(&Utc))
    }

    /// Refuses an expression two occurrences of which (over the next few hundred from
    /// `from`) are closer than `min_seconds`.
    pub fn check_interval(&self, from: DateTime<Utc>, min_seconds: u64) -> Result<(), FieldError> {
        let mut previous = match self.next_after(from) {
            Some(first) => first,
            None => {
                return Err(FieldError::new("cron", "never fires"));
            }
        };
        for _ in 0..INTERVAL_SAMPLES {
            let Some(next) = self.next_after(previous) else {
                break;
            };
            let gap = (next - previous).num_seconds();
            if gap < min_seconds as i64 {
                return Err(FieldError::new(
                    "cron",
                    format!(
                        "fires {gap} s apart (at {previous} and {next}); schedules may fire at \
                         most once every {min_seconds} s"
                    ),
                ));
            }
            previous = next;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    fn next(cron: &str, zone: &str, after: &str) -> String {
        CronSchedule::parse(cron, zone)
            .unwrap()
            .next_after(at(after))
            .unwrap()
            .to_rfc3339()
    }

    fn series(cron: &str, zone: &str, after: &str, n: usize) -> Vec<String> {
        let schedule = CronSchedule::parse(cron, zone).unwrap();
        let mut at = at(after);
        (0..n)
            .map(|_| {
                at = schedule.next_after(at).unwrap();
                at.to_rfc3339()
            })
            .collect()
    }

    #[test]
    fn a_daily_time_in_the_skipped_hour_fires_right_after_the_gap() {
        // Paris: 2026-03-29 02:00 CET becomes 03:00 CEST (01:00 UTC).
        assert_eq!(
            series("30 2 * * *", "Europe/Paris", "2026-03-27T12:00:00Z", 3),
            [
                "2026-03-28T01:30:00+00:00",
                "2026-03-29T01:00:00+00:00",
                "2026-03-30T00:30:00+00:00"
            ]
        );
        // New York: 2026-03-08 02:00 EST becomes 03:00 EDT (07:00 UTC).
        assert_eq!(
            series("30 2 * * *", "America/New_York", "2026-03-06T12:00:00Z", 3),
            [
                "2026-03-07T07:30:00+00:00",
                "2026-03-08T07:00:00+00:00",
                "2026-03-09T06:30:00+00:00"
            ]
        );
    }

    #[test]
    fn an_interval_skips_the_times_of_the_skipped_hour() {
        assert_eq!(
            series("*/30 * * * *", "Europe/Paris", "2026-03-29T00:00:00Z", 3),
            [
                "2026-03-29T00:30:00+00:00",
                // 02:00 and 02:30 local do not exist: 03:00 CEST is 01:00 UTC.
                "2026-03-29T01:00:00+00:00",
                "2026-03-29T01:30:00+00:00"
            ]
        );
        assert_eq!(
            series(
                "*/30 * * * *",
                "America/New_York",
                "2026-03-08T06:00:00Z",
                3
            ),
            [
                "2026-03-08T06:30:00+00:00",
                "2026-03-08T07:00:00+00:00",
                "2026-03-08T07:30:00+00:00"
            ]
        );
    }

    #[test]
    fn a_daily_time_in_the_repeated_hour_fires_once() {
        // Paris: 2026-10-25 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
        assert_eq!(
            series("30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z", 3),
            [
                "2026-10-25T00:30:00+00:00",
                "2026-10-26T01:30:00+00:00",
                "2026-10-27T01:30:00+00:00"
            ]
        );
        // New York: 2026-11-01 02:00 EDT goes back to 01:00 EST; 01:30 happens twice.
        assert_eq!(
            series("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 2),
            ["2026-11-01T05:30:00+00:00", "2026-11-02T06:30:00+00:00"]
        );
    }

    #[test]
    fn an_interval_fires_in_both_passes_of_the_repeated_hour() {
        assert_eq!(
            series(
                "0,30 1 * * *",
                "America/New_York",
                "2026-11-01T04:00:00Z",
                2
            ),
            ["2026-11-01T05:00:00+00:00", "2026-11-01T05:30:00+00:00"]
        );
        assert_eq!(
            series(
                "*/30 * * * *",
                "America/New_York",
                "2026-11-01T04:45:00Z",
                5
            ),
            [
                "2026-11-01T05:00:00+00:00",
                "2026-11-01T05:30:00+00:00",
                "2026-11-01T06:00:00+00:00",
                "2026-11-01T06:30:00+00:00",
                "2026-11-01T07:00:00+00:00"
            ]
        );
        assert_eq!(
            series("*/30 * * * *", "Europe/Paris", "2026-10-24T23:45:00Z", 4),
            [
                "2026-10-25T00:00:00+00:00",
                "2026-10-25T00:30:00+00:00",
                "2026-10-25T01:00:00+00:00",
                "2026-10-25T01:30:00+00:00"
            ]
        );
    }

    #[test]
    fn leap_days_and_the_last_day_of_february() {
        assert_eq!(
            next("0 12 29 2 *", "UTC", "2026-03-01T00:00:00Z"),
            "2028-02-29T12:00:00+00:00"
        );
        assert_eq!(
            series("0 0 L 2 *", "Asia/Tokyo", "2027-01-01T00:00:00Z", 2),
            ["2027-02-27T15:00:00+00:00", "2028-02-28T15:00:00+00:00"]
        );
    }

    #[test]
    fn nth_weekday_and_nearest_weekday_forms() {
        // The second Monday of December 2026 is the 14th.
        assert_eq!(
            next("0 9 * * 1#2", "Europe/Paris", "2026-12-01T00:00:00Z"),
            "2026-12-14T08:00:00+00:00"
        );
        // The weekday nearest the 15th of August 2026 (a Saturday) is Friday the 14th.
        assert_eq!(
            next("0 9 15W * *", "UTC", "2026-08-01T00:00:00Z"),
            "2026-08-14T09:00:00+00:00"
        );
    }

    #[test]
    fn six_fields_read_the_first_as_seconds() {
        assert_eq!(
            series("*/5 * * * * *", "UTC", "2026-01-01T00:00:00Z", 2),
            ["2026-01-01T00:00:05+00:00", "2026-01-01T00:00:10+00:00"]
        );
    }

    #[test]
    fn bad_expressions_and_zones_name_their_field() {
        for bad in [
            "",
            "* * * *",
            "* * * * * * *",
            "61 * * * *",
            "@daily",
            "x y z a b",
        ] {
            let error = CronSchedule::parse(bad, "UTC").unwrap_err();
            assert_eq!(error.field, "cron", "{bad}: {}", error.message);
        }
        let error = CronSchedule::parse("* * * * *", "Mars/Olympus").unwrap_err();
        assert_eq!(error.field, "time_zone");
    }

    #[test]
    fn firing_more_often_than_the_minimum_is_refused() {
        let from = at("2026-01-01T00:00:00Z");
        let every_minute = CronSchedule::parse("* * * * *", "UTC").unwrap();
        assert!(every_minute.check_interval(from, 60).is_ok());
        assert_eq!(
            every_minute.check_interval(from, 300).unwrap_err().field,
            "cron"
        );
        let two_close = CronSchedule::parse("0,1 9 * * *", "UTC").unwrap();
        assert!(two_close.check_interval(from, 120).is_err());
        let seconds = CronSchedule::parse("*/10 * * * * *", "UTC").unwrap();
        assert!(seconds.check_interval(from, 60).is_err());
        assert!(seconds.check_interval(from, 10).is_ok());
    }
}
