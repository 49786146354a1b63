//! A bad value from a `HYDRA_*` variable, told as such: clap names only the option (as if
//! typed on the command line), in three lines.

use super::settable;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::Command;
use std::ffi::OsString;

/// When `e` refuses a value of a `get` option that `argv` does not give but its variable
/// does: one line naming the variable and the cause (`HYDRA_HEADER`'s value not echoed: it may
/// be a token). `None` for any other error, which keeps clap's text.
pub fn bad_value(cmd: &Command, e: &clap::Error, argv: &[OsString]) -> Option<String> {
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let long = arg.split_whitespace().next()?.strip_prefix("--")?;
    let flag = format!("--{long}");
    let on_line = argv.iter().any(|a| {
        a.to_str()
            .is_some_and(|a| a == flag || a.starts_with(&format!("{flag}=")))
    });
    if on_line {
        return None;
    }
    let var = settable(cmd.find_subcommand("get")?)
        .find(|a| a.get_long() == Some(long))?
        .get_env()?
        .to_string_lossy()
        .into_owned();
    let value = std::env::var_os(&var)?;
    let shown = if long == "header" {
        String::new()
    } else {
        format!("={:?}", value.to_string_lossy())
    };
    let cause = std::error::Error::source(e).map_or_else(
        || format!("not a valid value for {flag}"),
        |c| c.to_string(),
    );
    let line = format!("{var}{shown}: {cause} (it sets {flag})");
    Some(hydra_scheme::text::for_people(&line))
}
