//! The engine options that change at run time (`/v1/config`); the engine checks each value.

use cairn::{ConfigEntry, ConfigKey, ConfigUnit, GetConfig, ListConfig, SetConfig, UnsetConfig};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::route::{Answer, PathParam, RouteVisitor, route};
use crate::{ADMIN, READ};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// One engine option that can change at run time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ConfigEntryBody {
    /// The option's name, such as `retention.max_age`.
    pub key: String,
    /// What its values are: `ms` (a duration in milliseconds), `count` (a whole number) or `number`.
    pub unit: String,
    /// The value in force; `null` for off (keep forever, no limit).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>, required = true))]
    pub value: serde_json::Value,
    /// The value the server was started with, in force when nothing is set.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>, required = true))]
    pub default: serde_json::Value,
    /// When the value was set at run time; `null` when it is the default.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub set_at: Option<Timestamp>,
}

impl From<&ConfigEntry> for ConfigEntryBody {
    fn from(entry: &ConfigEntry) -> Self {
        ConfigEntryBody {
            key: entry.key.as_str().to_owned(),
            unit: match entry.key.unit() {
                ConfigUnit::Duration => "ms",
                ConfigUnit::Count => "count",
                ConfigUnit::Number => "number",
            }
            .to_owned(),
            value: entry.value.to_json(),
            default: entry.default.to_json(),
            set_at: entry.set_at,
        }
    }
}

impl ConfigEntryBody {
    /// The engine's form of the entry.
    ///
    /// # Errors
    /// A key or value this version does not know.
    pub fn to_entry(&self) -> cairn::Result<ConfigEntry> {
        let key = ConfigKey::parse(&self.key)?;
        Ok(ConfigEntry {
            key,
            value: key.value_from_json(&self.value)?,
            default: key.value_from_json(&self.default)?,
            set_at: self.set_at,
        })
    }
}

/// Every engine option that can change at run time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ConfigListBody {
    /// The options, in a fixed order.
    pub config: Vec<ConfigEntryBody>,
}

/// Set an option at run time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetConfigRequest {
    /// The new value in the option's unit (milliseconds for durations), or `null` for off where the option
    /// allows it. Required: `DELETE` goes back to the default.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>, required = true))]
    pub value: serde_json::Value,
}

/// The `{key}` of an option's path.
pub const CONFIG_KEY: PathParam = PathParam {
    name: "key",
    description: "The option, such as `retention.max_age`",
    rule: "ConfigKeyName",
};

/// The options' routes declared here, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_config_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<SetConfig>();
    visitor.visit::<UnsetConfig>();
    visitor.visit::<ListConfig>();
    visitor.visit::<GetConfig>();
}

impl Answer<ConfigEntry> for ConfigEntryBody {
    fn from_output(entry: ConfigEntry) -> Self {
        ConfigEntryBody::from(&entry)
    }

    fn into_output(self) -> cairn::Result<ConfigEntry> {
        self.to_entry()
    }
}

route! {
    SetConfig: Put "/v1/config/{key}", params [CONFIG_KEY], tag "config", id "set_config", access ADMIN, reach Server,
    summary "Sets an option: stored, applied at once, kept across restarts.",
    done "The option as it now is",
    errors [(400, "No such option, or a bad value, naming the option")],
    path |r| [r.key.as_str()],
    body SetConfigRequest = |r| SetConfigRequest { value: r.value.to_json() },
    answer ConfigEntryBody,
    from |path, body| {
        let key = ConfigKey::parse(path.text("key")?)?;
        Ok(SetConfig { key, value: key.value_from_json(&body.value)? })
    },
}

route! {
    UnsetConfig: Delete "/v1/config/{key}", params [CONFIG_KEY], tag "config", id "unset_config",
        access ADMIN, reach Server,
    summary "Goes back to the server's default for an option.",
    done "The option as it now is",
    errors [(400, "No such option, or a default that does not fit the values set")],
    path |r| [r.key.as_str()],
    no body,
    answer ConfigEntryBody,
    from |path| Ok(UnsetConfig { key: ConfigKey::parse(path.text("key")?)? }),
}

impl Answer<Vec<ConfigEntry>> for ConfigListBody {
    fn from_output(entries: Vec<ConfigEntry>) -> Self {
        ConfigListBody {
            config: entries.iter().map(ConfigEntryBody::from).collect(),
        }
    }

    fn into_output(self) -> cairn::Result<Vec<ConfigEntry>> {
        self.config.iter().map(ConfigEntryBody::to_entry).collect()
    }
}

route! {
    ListConfig: Get "/v1/config", params [], tag "config", id "list_config", access READ, reach Server,
    summary "Every option, with the value in force, the server's default, and when it was set at run time.",
    done "The options",
    errors [],
    path |_r| [],
    no body,
    answer ConfigListBody,
    from |_received| Ok(ListConfig),
}

route! {
    GetConfig: Get "/v1/config/{key}", params [CONFIG_KEY], tag "config", id "get_config", access READ, reach Server,
    summary "One option.",
    done "The option",
    errors [(400, "No such option")],
    path |r| [r.key.as_str()],
    no body,
    answer ConfigEntryBody,
    from |received| Ok(GetConfig { key: ConfigKey::parse(received.text("key")?)? }),
}
