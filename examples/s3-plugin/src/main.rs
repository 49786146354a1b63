//! `hydra-s3`: the `hydra` command line with the `s3://` scheme beside the built-in ones.
//! Credentials as the AWS tools find them; `AWS_ENDPOINT_URL` for an S3-compatible server;
//! `AWS_REGION` (default `us-east-1`).

use std::process::ExitCode;
use std::sync::Arc;

use hydra_s3_example::{load_credentials, S3Options, S3Scheme};
use hydra_scheme::Url;

fn main() -> ExitCode {
    let plugins = hydra_cli::Plugins::new().with(|net, registry| {
        let credentials =
            load_credentials(|k| std::env::var(k).ok()).map_err(|e| format!("S3: {e}"))?;
        let region = std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into());
        let mut opts = S3Options::aws(&region, credentials);
        if let Ok(e) = std::env::var("AWS_ENDPOINT_URL") {
            opts.endpoint = Url::parse(&e).map_err(|err| format!("AWS_ENDPOINT_URL: {err}"))?;
        }
        if let Some(t) = net.timeout {
            opts.http.connect_timeout = t;
            opts.http.first_byte_timeout = t;
            opts.http.idle_read_timeout = t;
        }
        registry.register(Arc::new(S3Scheme::new(opts)?));
        Ok(())
    });
    hydra_cli::main_with(plugins)
}
