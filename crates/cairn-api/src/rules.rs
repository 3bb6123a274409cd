//! The rules the engine holds outside input to, said as JSON Schema for the OpenAPI document: each type here is a
//! schema (`#/components/schemas/QueueName`, …) that the bodies' fields name with `#[schema(value_type = …)]`, and
//! nothing else. Where JSON Schema cannot say a rule (a length in bytes rather than characters), the description
//! says it. The tests at the bottom hold each schema to the engine's own parsing.

use std::borrow::Cow;

use cairn::ConfigKey;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

/// No control character (Unicode's `Cc`: U+0000 to U+001F and U+007F to U+009F), as a character class's body.
const NO_CONTROL: &str = r"\u0000-\u001f\u007f-\u009f";

/// Declares a schema-only type: its name in the document is the type's.
macro_rules! rule {
    ($(#[$doc:meta])* $name:ident => $schema:expr) => {
        $(#[$doc])*
        pub struct $name;

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                $schema.into()
            }
        }

        impl ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
        }
    };
}

/// Text of 1 to `max` bytes without control characters; `what` and the byte limit in words.
fn text(max: usize, what: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(max))
        .pattern(Some(format!("^[^{NO_CONTROL}]+$")))
        .description(Some(format!(
            "{what}: 1 to {max} bytes of UTF-8 (so at most {max} characters, fewer when some take more than a \
             byte), without control characters"
        )))
}

rule!(
    /// A job's id: a positive integer.
    JobId => ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(1))
        .description(Some("A job's id: a positive integer"))
);

rule!(
    /// A batch's id: a positive integer.
    BatchId => ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(1))
        .description(Some("A batch's id: a positive integer"))
);

rule!(
    /// A lease token as the server gave it: a decimal integer of 64 bits.
    LeaseToken => ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(format!(
            "^(?:\\+?0*(?:[0-9]{{1,18}}|{})|-0*(?:[0-9]{{1,18}}|{}))$",
            at_most(&i64::MAX.to_string()),
            at_most(&i64::MIN.unsigned_abs().to_string()),
        )))
        .description(Some(
            "A lease token, as the server gave it: a decimal integer that fits in 64 bits (signed)",
        ))
);

/// A pattern for the numbers of as many digits as `max` that are at most `max`: a digit below `max`'s after a
/// prefix of it, then any digits; or `max` itself.
fn at_most(max: &str) -> String {
    let digits: Vec<u32> = max
        .chars()
        .map(|c| c.to_digit(10).expect("a decimal number"))
        .collect();
    let mut alternatives = Vec::new();
    for (at, digit) in digits.iter().enumerate() {
        let lowest = u32::from(at == 0);
        if *digit > lowest {
            let rest = digits.len() - at - 1;
            alternatives.push(format!(
                "{}[{lowest}-{}][0-9]{{{rest}}}",
                &max[..at],
                digit - 1
            ));
        }
    }
    alternatives.push(max.to_owned());
    format!("(?:{})", alternatives.join("|"))
}

rule!(
    /// A queue's name: 1 to 128 of letters, digits and `_ - . :`.
    QueueName => ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(128))
        .pattern(Some("^[A-Za-z0-9_.:-]+$"))
        .description(Some("A queue's name: 1 to 128 ASCII letters, digits and `_ - . :`"))
);

rule!(
    /// A job's name.
    JobName => text(255, "A job's name, such as `email.send`")
);

rule!(
    /// A worker's id.
    WorkerId => text(255, "A worker's id")
);

rule!(
    /// A step's name within its job.
    StepName => text(255, "A step's name within its job")
);

rule!(
    /// A signal's key.
    SignalKey => text(255, "The key a signal is sent to and a job waits for, such as `order-42/packed`")
);

rule!(
    /// A tag.
    Tag => text(128, "A tag")
);

rule!(
    /// A unique key.
    UniqueKey => text(255, "A unique key")
);

rule!(
    /// A debounce key.
    DebounceKey => text(255, "The key a burst of debounced pushes shares")
);

rule!(
    /// A throttle key.
    ThrottleKey => text(255, "The key a throttle holds for its period")
);

rule!(
    /// A concurrency key.
    ConcurrencyKey => text(255, "A job's concurrency key: its queue's limit per key, and turns, apply to it")
);

rule!(
    /// A recurring template's key.
    RecurringKey => text(255, "A recurring template's key")
);

rule!(
    /// A W3C trace context of version 00.
    TraceParent => ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"))
        .description(Some(
            "A W3C `traceparent` of version 00: `00-`, the trace id (32 lowercase hex digits), `-`, the parent \
             span's id (16), `-`, the flags (2). Neither id may be all zeros.",
        ))
);

rule!(
    /// A failure group, as a failing worker names it.
    FailureGroup => ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(255))
        .description(Some(
            "A failure group, such as `invalid-address`: 1 to 255 bytes of UTF-8 (so at most 255 characters, \
             fewer when some take more than a byte)",
        ))
);

rule!(
    /// The failure group to unfail: any non-empty text (a group no job has unfails none).
    GroupToUnfail => ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .description(Some("A failure group (see `GET /v1/failures`)"))
);

rule!(
    /// A GLOB over job names, with every `[` closed.
    NamePattern => {
        // Outside a set, anything but `[`; a set is `[`, an optional `^`, then a `]` that is a member when it comes
        // first, then anything up to the `]` that closes it (one alternative for each way it may start, so that
        // no backtracking reads a first `]` as the closing one).
        let member = format!("[^\\]{NO_CONTROL}]");
        let set = format!(r"\[(?:\^?\]{member}*|\^{member}+|[^\]\^{NO_CONTROL}]{member}*)\]");
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(1024))
            .pattern(Some(format!("^(?:[^\\[{NO_CONTROL}]|{set})+$")))
            .description(Some(
                "A pattern over job names in SQLite's GLOB syntax (`*`, `?`, `[abc]`, `[^a-z]`; a `*`, `?` or `[` \
                 that a name holds is written `[*]`, `[?]`, `[[]`), every `[` closed by a `]`: 1 to 1,024 bytes \
                 of UTF-8, without control characters",
            ))
    }
);

rule!(
    /// One of the engine's options.
    ConfigKeyName => ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(ConfigKey::ALL.iter().map(|k| k.as_str())))
        .description(Some("One of the engine's options"))
);

rule!(
    /// How a dequeue orders its queues.
    QueueOrder => ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["ordered", "round_robin"]))
        .description(Some("`ordered`: earlier queues first; `round_robin`: each queue in turn, by its weight"))
);

rule!(
    /// A queue's weight in a round-robin dequeue.
    QueueWeight => ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int32)))
        .minimum(Some(1))
        .maximum(Some(cairn::MAX_QUEUE_WEIGHT))
        .description(Some("How many jobs the queue gives per turn"))
);

rule!(
    /// What a recurring template does with the slots it missed.
    MissedSlots => ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["skip", "once", "all"]))
        .description(Some(
            "The slots missed while the server was down: `skip` them, run `once` for them all, or run `all`",
        ))
);

rule!(
    /// What a recurring template does at a slot when its previous run is still live.
    OverlapPolicy => ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["allow", "skip", "replace"]))
        .description(Some(
            "When the previous slot's job is still live at the next slot: `allow` another run, `skip` the slot, or \
             `replace` the previous run",
        ))
);

rule!(
    /// Whether a worker is still about.
    WorkerStatus => ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["live", "stopped", "gone"]))
        .description(Some(
            "`live`: seen within five minutes, or holding a lease that has not run out; `stopped`: it said it \
             stops; `gone`: silent for five minutes, holding no live lease",
        ))
);

rule!(
    /// A job's state.
    JobStateName => ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(cairn::JobState::ALL.iter().map(|s| s.as_str())))
        .description(Some("A job's state"))
);

rule!(
    /// The window of statistics.
    StatsPeriodName => ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["hour", "day", "week"]))
        .description(Some("`hour` (the default), `day` or `week`"))
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON Schema of `T`, as the document says it.
    fn schema<T: PartialSchema>() -> serde_json::Value {
        serde_json::to_value(T::schema()).unwrap()
    }

    /// Whether `value` fits `T`'s pattern and lengths (the validator reads patterns as ECMA 262 does; these use
    /// nothing where it and the `regex` crate differ).
    fn fits<T: PartialSchema>(value: &str) -> bool {
        let schema = schema::<T>();
        let pattern =
            regex_automata::meta::Regex::new(schema["pattern"].as_str().unwrap()).unwrap();
        let chars = value.chars().count() as u64;
        pattern.is_match(value)
            && schema["minLength"].as_u64().is_none_or(|min| chars >= min)
            && schema["maxLength"].as_u64().is_none_or(|max| chars <= max)
    }

    #[test]
    fn name_schemas_say_the_engines_rules() {
        for value in [
            "a",
            "email.send",
            "x y",
            "é",
            "a\u{7f}b",
            "\n",
            "",
            "a\u{9f}",
            "a\u{a0}",
        ] {
            assert_eq!(
                fits::<JobName>(value),
                cairn::JobName::parse(value).is_ok(),
                "{value:?}"
            );
            assert_eq!(
                fits::<QueueName>(value),
                cairn::QueueName::parse(value).is_ok(),
                "{value:?}"
            );
            assert_eq!(
                fits::<DebounceKey>(value),
                cairn::DebounceKey::parse(value).is_ok(),
                "{value:?}"
            );
            assert_eq!(
                fits::<ThrottleKey>(value),
                cairn::ThrottleKey::parse(value).is_ok(),
                "{value:?}"
            );
            assert_eq!(
                fits::<ConcurrencyKey>(value),
                cairn::ConcurrencyKey::parse(value).is_ok(),
                "{value:?}"
            );
        }
        let long = "q".repeat(128);
        assert!(fits::<QueueName>(&long) && cairn::QueueName::parse(long.as_str()).is_ok());
        let longer = "q".repeat(129);
        assert!(!fits::<QueueName>(&longer) && cairn::QueueName::parse(longer.as_str()).is_err());
    }

    /// The pattern holds a trace context to the engine's rules, but for ids of all zeros, which its description
    /// names instead (a pattern without look-ahead cannot).
    #[test]
    fn the_trace_context_schema_holds_to_the_engines_rules() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        for value in [
            good.to_owned(),
            good.to_uppercase(),
            good.replacen("00-", "01-", 1),
            format!("{good}-x"),
            good[..54].to_owned(),
            "00-4bf92f35-00f067aa0ba902b7-01".to_owned(),
            String::new(),
        ] {
            assert_eq!(
                fits::<TraceParent>(&value),
                cairn::TraceParent::parse(value.as_str()).is_ok(),
                "{value:?}"
            );
        }
        let zeros = format!("00-{}-00f067aa0ba902b7-01", "0".repeat(32));
        assert!(fits::<TraceParent>(&zeros) && cairn::TraceParent::parse(zeros).is_err());
    }

    #[test]
    fn the_glob_schema_says_which_sets_are_closed() {
        for value in [
            "*", "email.*", "[a]", "[^a]", "[]]", "[^]]", "[]", "[^]", "[", "a[b", "[[]", "[^^]",
            "[]a]", "]", "[a]]", "[^]a]", "x[", "[*]?", "a\tb",
        ] {
            assert_eq!(
                fits::<NamePattern>(value),
                cairn::NamePattern::parse(value).is_ok(),
                "{value:?}"
            );
        }
    }

    #[test]
    fn the_token_schema_takes_every_token() {
        for token in [
            "-9223372036854775808",
            "-1",
            "0",
            "+7",
            "007",
            "9223372036854775807",
            "9223372036854775806",
            "8999999999999999999",
            "",
            "1.5",
            "9223372036854775808",
            "-9223372036854775809",
            "9300000000000000000",
            "10000000000000000000",
            "--1",
            "+",
            "1_0",
        ] {
            assert_eq!(
                fits::<LeaseToken>(token),
                token.parse::<i64>().is_ok(),
                "{token}"
            );
        }
    }

    #[test]
    fn the_config_keys_are_the_engines() {
        let keys = schema::<ConfigKeyName>()["enum"].clone();
        for key in keys.as_array().unwrap() {
            assert!(ConfigKey::parse(key.as_str().unwrap()).is_ok(), "{key}");
        }
        assert_eq!(keys.as_array().unwrap().len(), ConfigKey::ALL.len());
    }
}
