//! The options a library download starts from: `hydra get`'s defaults, without the
//! environment (`HYDRA_*` variables) or the config file, which are the command line's.

use crate::get::GetArgs;
use clap::{Args, FromArgMatches};

/// `hydra get URL`'s arguments with every option at its default, whatever the environment.
pub(super) fn get_args(urls: Vec<String>) -> GetArgs {
    let command = GetArgs::augment_args(clap::Command::new("get")).mut_args(|a| a.env(None));
    let matches = command
        .try_get_matches_from(["get", "placeholder"])
        .expect("hydra get's defaults parse");
    let mut args = GetArgs::from_arg_matches(&matches).expect("hydra get's defaults parse");
    args.urls = urls;
    args
}

#[cfg(test)]
mod tests {
    use super::get_args;

    #[test]
    fn the_defaults_are_those_of_hydra_get() {
        let a = get_args(vec!["http://h/f".into()]);
        assert_eq!(a.urls, ["http://h/f"]);
        assert_eq!((a.max_connections, a.per_host, a.retries), (16, 4, 5));
        assert!(!a.resume && !a.no_clobber && !a.json && !a.quiet);
        assert!(a.output.is_none() && a.checksum.is_none() && a.proxy.is_none());
    }
}
