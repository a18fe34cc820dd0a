//! What every command's file uses: its answer (`Output`), its failure and
//! the helpers that render answers as text, imported with one
//! `use super::prelude::*`.
//!
//! Invariant: only names shared by most command files are here; a helper
//! one family uses stays imported by name where it is used.

pub(super) use super::Output;
pub(super) use super::failure::{Failure, out, usage};
pub(super) use super::show::{each, items, joined, s, shown};
