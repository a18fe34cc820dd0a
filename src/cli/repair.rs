//! Repairs of an instance by hand: `add-token`, `move-token`,
//! `cancel-token`, `trigger`.
//!
//! Invariant: each command owns its arguments, its human text and its JSON;
//! a repair's answer names what it changed.

use super::Output;
use super::failure::{Failure, out, usage};
use super::values::{VarArgs, parse_vars};
use clap::Args;
use postfach::contract::repair_json;
use postfach::{Error, Postfach};
use serde_json::json;

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

/// `postfach add-token` against the open database.
pub(super) async fn add_token(pf: &Postfach, args: AddTokenArgs) -> Result<Output, Failure> {
    let AddTokenArgs {
        instance,
        element,
        force,
    } = args;
    let r = pf.add_token(instance, &element, force).await?;
    Ok(repair_output(instance, "added", &r))
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
    Ok(repair_output(instance, "moved", &r))
}

/// `postfach cancel-token` against the open database.
pub(super) async fn cancel_token(pf: &Postfach, args: CancelTokenArgs) -> Result<Output, Failure> {
    let CancelTokenArgs { instance, token } = args;
    let r = pf.cancel_token(instance, token).await?;
    Ok(repair_output(instance, "cancelled", &r))
}

/// `postfach trigger` against the open database.
pub(super) async fn trigger(pf: &Postfach, args: TriggerArgs) -> Result<Output, Failure> {
    let TriggerArgs {
        instance,
        token,
        vars,
    } = args;
    let v = parse_vars(&vars.var).map_err(usage)?;
    let token = token_at(pf, instance, &token)?;
    let t = pf.trigger(instance, token, v).await?;
    Ok(out(
        json!({"instance": instance.to_string(), "token": token, "triggered": t.element, "waiting_at": t.waiting_at}),
        format!(
            "token {token} left {}; instance {instance} now waits at {}",
            t.element,
            t.waiting_at.join(", ")
        ),
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
    let token = token_at(pf, instance, &token)?;
    let t = pf.ad_hoc(instance, token, activate.as_deref()).await?;
    let did = if activate.is_some() {
        "activated"
    } else {
        "completed"
    };
    Ok(out(
        json!({"instance": instance.to_string(), "token": token, did: t.element, "waiting_at": t.waiting_at}),
        format!(
            "{did} {}; instance {instance} now waits at {}",
            t.element,
            t.waiting_at.join(", ")
        ),
    ))
}

/// A token given as its id, or as the element its one waiting token rests at
/// (a multi-instance body is not counted: its inner instances are what
/// wait). An instance that has ended is an error saying so.
pub(super) fn token_at(pf: &Postfach, instance: u64, given: &str) -> Result<u64, Failure> {
    if let Ok(id) = given.parse::<u64>() {
        return Ok(id);
    }
    let view = pf.reader()?.instance(instance)?.ok_or(Error::Engine(
        postfach::EngineError::UnknownInstance(instance),
    ))?;
    if view.state != "active" {
        return Err(Error::Engine(postfach::EngineError::InstanceEnded(instance)).into());
    }
    let bodies: Vec<u64> = view.tokens.iter().filter_map(|t| t.scope).collect();
    let at: Vec<u64> = view
        .tokens
        .iter()
        .filter(|t| t.element == given)
        .filter(|t| {
            // a body holds inner instances at its own element
            !(bodies.contains(&t.token)
                && view
                    .tokens
                    .iter()
                    .any(|i| i.scope == Some(t.token) && i.element == t.element))
        })
        .map(|t| t.token)
        .collect();
    match at.as_slice() {
        [one] => Ok(*one),
        [] => Err(usage(format!(
            "no token of instance {instance} rests at '{given}' (it waits at {})",
            view.waiting_at.join(", ")
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
pub(super) fn repair_output(instance: u64, verb: &str, r: &postfach::Repair) -> Output {
    let text = if r.jobs_created.is_empty() {
        format!(
            "token {} {verb}; instance {instance} now waits at {}",
            r.token,
            r.waiting_at.join(", ")
        )
    } else {
        format!(
            "token {} {verb}; it waits for async job(s) {} — the work happens when they run (postfach work), not now",
            r.token,
            r.jobs_created
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    out(repair_json(instance, r), text)
}
