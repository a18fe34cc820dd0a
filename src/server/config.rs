//! postfach.toml, the configuration of `postfach run`: alarms, Pub/Sub
//! connection, subscriptions, send-task topic bindings and correlation keys.
//!
//! Invariant: a configuration that parses is complete and valid — every
//! duration, source and reason is checked here, with the file and the field in
//! the error, before anything starts.

use crate::ingress::SubscriptionConfig;
use crate::server::alarms::Condition;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[pubsub]`: how to reach Pub/Sub.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PubsubConfig {
    /// Project of short topic and subscription names (default
    /// `$GOOGLE_CLOUD_PROJECT`, else `postfach`).
    pub project: Option<String>,
    /// `http://HOST:PORT` of an emulator or `https://...` of a private endpoint.
    /// Default: `$PUBSUB_EMULATOR_HOST` when set (plaintext, no credentials, as
    /// Google's clients do), else Google's endpoint with application default
    /// credentials.
    pub endpoint: Option<String>,
    /// Create missing topics and subscriptions at start (default: only when
    /// talking to an emulator).
    pub create: Option<bool>,
}

/// The configuration file of `postfach run`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `[alarms.NAME]`: conditions that fire an alarm.
    #[serde(default)]
    pub alarms: BTreeMap<String, Condition>,
    /// `[pubsub]`: how to reach Pub/Sub.
    #[serde(default)]
    pub pubsub: PubsubConfig,
    /// `[[subscriptions]]`: each consumed into the engine.
    #[serde(default)]
    pub subscriptions: Vec<SubscriptionConfig>,
    /// `[send_topics]`: send task id → topic its outbox publishes to.
    #[serde(default)]
    pub send_topics: BTreeMap<String, String>,
    /// `[correlation_keys]`: message name → key variable (as `--correlation-key`).
    #[serde(default)]
    pub correlation_keys: BTreeMap<String, String>,
}

impl ConfigFile {
    /// Parses postfach.toml; errors name the file and what is wrong.
    pub fn parse(file: &str, text: &str) -> Result<Self, String> {
        let c: ConfigFile = toml::from_str(text).map_err(|e| format!("{file}: {e}"))?;
        for (name, cond) in &c.alarms {
            cond.check()
                .map_err(|e| format!("{file}: alarm '{name}': {e}"))?;
        }
        for s in &c.subscriptions {
            s.compile().map_err(|e| format!("{file}: {e}"))?;
        }
        for (element, topic) in &c.send_topics {
            if topic.trim().is_empty() {
                return Err(format!("{file}: send_topics.{element}: the topic is empty"));
            }
        }
        Ok(c)
    }

    /// The deploy-time overrides: correlation keys and send-task topics.
    pub fn overrides(&self) -> BTreeMap<String, String> {
        let mut m = self.correlation_keys.clone();
        for (element, topic) in &self.send_topics {
            m.insert(crate::model::send_topic_override(element), topic.clone());
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_postfach_toml_parses() {
        let c = ConfigFile::parse("postfach.toml", include_str!("../../postfach.toml")).unwrap();
        assert_eq!(
            c.subscriptions[0].topic.as_deref(),
            Some("auftrag-abgeschlossen")
        );
        assert_eq!(c.send_topics["auftragUebergeben"], "auftraege");
        assert_eq!(c.alarms.len(), 2);
    }

    #[test]
    fn full_file_parses_and_errors_name_the_field() {
        let c = ConfigFile::parse(
            "postfach.toml",
            r#"
[pubsub]
project = "shop"

[[subscriptions]]
subscription = "auftrag-abgeschlossen-sub"
message = "AuftragAbgeschlossen"
key = "/auftragId"
ttl = "24h"

[send_topics]
auftragUebergeben = "auftraege"

[correlation_keys]
AuftragAbgeschlossen = "auftragId"
"#,
        )
        .unwrap();
        assert_eq!(c.subscriptions.len(), 1);
        assert_eq!(c.subscriptions[0].message_id, "attribute:eventId");
        assert_eq!(
            c.overrides()
                .get("sendTask:auftragUebergeben")
                .map(String::as_str),
            Some("auftraege")
        );
        let e = ConfigFile::parse(
            "p.toml",
            "[[subscriptions]]\nsubscription = \"s\"\nmessage = \"M\"\nkey = \"auftragId\"\n",
        )
        .unwrap_err();
        assert!(e.starts_with("p.toml: subscription 's': key:"), "{e}");
        let e =
            ConfigFile::parse("p.toml", "[[subscriptions]]\nsubscription = \"s\"\n").unwrap_err();
        assert!(e.contains("message"), "{e}");
    }
}
