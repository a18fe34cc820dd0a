//! Repairs of an instance by hand: `add-token`, `move-token`,
//! `cancel-token`, `trigger`, `cancel`, `set-variables`.
//!
//! Invariant: each command owns its arguments, its human text and its JSON;
//! a repair's answer names what it changed.

use super::prelude::*;
use super::values::{VarArgs, parse_vars};
use clap::Args;
use postfach::contract::repair_json;
use postfach::server::http::requests;
use postfach::{Error, Postfach};
use serde_json::{Value, json};

// The arguments of `postfach move-token`.
#[derive(Debug, Args)]
pub(crate) struct MoveTokenArgs {
    pub(crate) instance: u64,
    pub(crate) token: u64,
    pub(crate) element: String,
    #[arg(long)]
    pub(crate) force: bool,
}

// The arguments of `postfach cancel-token`.
#[derive(Debug, Args)]
pub(crate) struct CancelTokenArgs {
    pub(crate) instance: u64,
    pub(crate) token: u64,
}

// The arguments of `postfach cancel`.
#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    pub(crate) instance: u64,
}

// The arguments of `postfach set-variables`.
#[derive(Debug, Args)]
pub(crate) struct SetVariablesArgs {
    pub(crate) instance: u64,
    /// Set them as this token writes them (default: in the instance).
    #[arg(long)]
    pub(crate) token: Option<u64>,
    /// Set them on the token itself (needs --token).
    #[arg(long, requires = "token")]
    pub(crate) local: bool,
    #[command(flatten)]
    pub(crate) vars: VarArgs,
}

// The arguments of `postfach trigger`.
#[derive(Debug, Args)]
pub(crate) struct TriggerArgs {
    pub(crate) instance: u64,
    /// The token id, or the element its one waiting token rests at.
    pub(crate) token: String,
    #[command(flatten)]
    pub(crate) vars: VarArgs,
}

// The arguments of `postfach ad-hoc`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("ad_hoc_action").required(true).args(["activate", "complete"])))]
pub(crate) struct AdHocArgs {
    pub(crate) instance: u64,
    /// The token holding the ad-hoc subprocess, or the subprocess's element.
    pub(crate) token: String,
    /// Run this activity of it.
    #[arg(long, value_name = "ELEMENT")]
    pub(crate) activate: Option<String>,
    /// Complete it (nothing may run in it).
    #[arg(long)]
    pub(crate) complete: bool,
}

// The arguments of `postfach add-token`.
#[derive(Debug, Args)]
pub(crate) struct AddTokenArgs {
    pub(crate) instance: u64,
    pub(crate) element: String,
    #[arg(long)]
    pub(crate) force: bool,
}

/// The request of `postfach add-token` and `move-token`.
pub(super) fn token_request(element: String, force: bool) -> requests::TokenBody {
    requests::TokenBody { element, force }
}

/// `postfach add-token` against the open database.
pub(super) async fn add_token(pf: &Postfach, args: AddTokenArgs) -> Result<Output, Failure> {
    let AddTokenArgs {
        instance,
        element,
        force,
    } = args;
    let r = pf.add_token(instance, &element, force).await?;
    Ok(shown(repair_json(instance, &r), |d| {
        repair_text(d, "added")
    }))
}

/// `postfach move-token` against the open database.
pub(super) async fn move_token(pf: &Postfach, args: MoveTokenArgs) -> Result<Output, Failure> {
    let MoveTokenArgs {
        instance,
        token,
        element,
        force,
    } = args;
    let r = pf.move_token(instance, token, &element, force).await?;
    Ok(shown(repair_json(instance, &r), |d| {
        repair_text(d, "moved")
    }))
}

/// `postfach cancel-token` against the open database.
pub(super) async fn cancel_token(pf: &Postfach, args: CancelTokenArgs) -> Result<Output, Failure> {
    let CancelTokenArgs { instance, token } = args;
    let r = pf.cancel_token(instance, token).await?;
    Ok(shown(repair_json(instance, &r), |d| {
        repair_text(d, "cancelled")
    }))
}

/// `postfach cancel` against the open database.
pub(super) async fn cancel(pf: &Postfach, args: CancelArgs) -> Result<Output, Failure> {
    pf.cancel_instance(args.instance).await?;
    Ok(shown(
        json!({"instance": args.instance.to_string(), "state": "cancelled"}),
        cancelled_text,
    ))
}

/// The human text of `cancel`.
pub(super) fn cancelled_text(d: &Value) -> String {
    format!("instance {} cancelled", s(&d["instance"]))
}

/// The request of `postfach set-variables`.
pub(super) fn variables_request(
    args: &SetVariablesArgs,
) -> Result<requests::VariablesBody, Failure> {
    let variables = parse_vars(&args.vars.var).map_err(usage)?;
    if variables.is_empty() {
        return Err(usage(
            "set-variables: give at least one --var NAME=VALUE".into(),
        ));
    }
    Ok(requests::VariablesBody {
        variables,
        token: args.token,
        local: args.local,
    })
}

/// `postfach set-variables` against the open database.
pub(super) async fn set_variables(
    pf: &Postfach,
    args: SetVariablesArgs,
) -> Result<Output, Failure> {
    let b = variables_request(&args)?;
    let names: Vec<String> = b.variables.keys().cloned().collect();
    pf.set_variables(args.instance, b.token.unwrap_or(0), b.local, b.variables)
        .await?;
    Ok(shown(
        json!({"instance": args.instance.to_string(), "token": b.token, "variables": names}),
        variables_text,
    ))
}

/// The human text of `set-variables`.
pub(super) fn variables_text(d: &Value) -> String {
    format!(
        "instance {}: set {}",
        s(&d["instance"]),
        joined(&d["variables"])
    )
}

/// The request of `postfach trigger`.
pub(super) fn trigger_request(vars: &VarArgs) -> Result<requests::TriggerBody, Failure> {
    Ok(requests::TriggerBody {
        variables: parse_vars(&vars.var).map_err(usage)?,
    })
}

/// `postfach trigger` against the open database.
pub(super) async fn trigger(pf: &Postfach, args: TriggerArgs) -> Result<Output, Failure> {
    let b = trigger_request(&args.vars)?;
    let instance = args.instance;
    let token = token_at(&detail(pf, instance)?, instance, &args.token)?;
    let t = pf.trigger(instance, token, b.variables).await?;
    Ok(shown(
        json!({"instance": instance.to_string(), "token": token, "triggered": t.element, "waiting_at": t.waiting_at}),
        |d| moved_on_text(d, "triggered"),
    ))
}

/// `postfach ad-hoc` against the open database.
pub(super) async fn ad_hoc(pf: &Postfach, args: AdHocArgs) -> Result<Output, Failure> {
    let AdHocArgs {
        instance,
        token,
        activate,
        complete: _,
    } = args;
    let token = token_at(&detail(pf, instance)?, instance, &token)?;
    let t = pf.ad_hoc(instance, token, activate.as_deref()).await?;
    let did = if activate.is_some() {
        "activated"
    } else {
        "completed"
    };
    Ok(shown(
        json!({"instance": instance.to_string(), "token": token, did: t.element, "waiting_at": t.waiting_at}),
        |d| moved_on_text(d, did),
    ))
}

/// What a trigger or an ad-hoc action did: `did` is the field naming the
/// element (`triggered`, `activated`, `completed`).
pub(super) fn moved_on_text(d: &Value, did: &str) -> String {
    let waits = format!(
        "instance {} now waits at {}",
        s(&d["instance"]),
        joined(&d["waiting_at"])
    );
    match did {
        "triggered" => format!("token {} left {}; {waits}", s(&d["token"]), s(&d[did])),
        _ => format!("{did} {}; {waits}", s(&d[did])),
    }
}

/// An instance's document, as `GET /instances/{id}` answers it.
fn detail(pf: &Postfach, instance: u64) -> Result<Value, Failure> {
    let view = pf.reader()?.instance(instance)?.ok_or(Error::Engine(
        postfach::EngineError::UnknownInstance(instance),
    ))?;
    Ok(serde_json::to_value(view).unwrap_or_default())
}

/// A token given as its id, or as the element its one waiting token rests at
/// (a multi-instance body is not counted: its inner instances are what
/// wait), read from the instance's document. An instance that has ended is
/// an error saying so.
pub(super) fn token_at(view: &Value, instance: u64, given: &str) -> Result<u64, Failure> {
    if let Ok(id) = given.parse::<u64>() {
        return Ok(id);
    }
    if view["state"] != "active" {
        return Err(Error::Engine(postfach::EngineError::InstanceEnded(instance)).into());
    }
    let tokens = each(&view["tokens"]);
    let scope = |t: &Value| t["scope"].as_u64();
    let bodies: Vec<u64> = tokens.iter().filter_map(scope).collect();
    let at: Vec<u64> = tokens
        .iter()
        .filter(|t| t["element"] == given)
        .filter_map(|t| t["token"].as_u64().map(|id| (id, t)))
        .filter(|(id, t)| {
            // a body holds inner instances at its own element
            !(bodies.contains(id)
                && tokens
                    .iter()
                    .any(|i| scope(i) == Some(*id) && i["element"] == t["element"]))
        })
        .map(|(id, _)| id)
        .collect();
    match at.as_slice() {
        [one] => Ok(*one),
        [] => Err(usage(format!(
            "no token of instance {instance} rests at '{given}' (it waits at {})",
            joined(&view["waiting_at"])
        ))),
        many => Err(usage(format!(
            "{} tokens of instance {instance} rest at '{given}' ({}): give the token id",
            many.len(),
            many.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// What a repair did, saying plainly when it only scheduled async work.
pub(super) fn repair_text(d: &Value, verb: &str) -> String {
    let jobs = items(&d["jobs_created"]);
    if jobs.is_empty() {
        format!(
            "token {} {verb}; instance {} now waits at {}",
            s(&d["token"]),
            s(&d["instance"]),
            joined(&d["waiting_at"])
        )
    } else {
        format!(
            "token {} {verb}; it waits for async job(s) {} — the work happens when they run (postfach work), not now",
            s(&d["token"]),
            jobs.join(", ")
        )
    }
}
