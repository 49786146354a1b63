//! `hydra sim`: the scheduler in virtual time, against the fluid oracle and the baselines.

use clap::Args;
use hydra_sim::experiments::{run_experiment, ExperimentOptions, Report, EXPERIMENTS};
use std::io::Write;
use std::process::ExitCode;

/// Arguments of `hydra sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// The experiment: storm, collapse, sweep, failure, opening or stream.
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(EXPERIMENTS))]
    pub experiment: String,
    /// Seeds per row (seeds 0..N).
    #[arg(long, default_value_t = 12)]
    pub seeds: u64,
    /// Print one JSON document on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `hydra sim`.
pub fn main(args: SimArgs) -> ExitCode {
    let opts = ExperimentOptions { seeds: args.seeds };
    let Some(report) = run_experiment(&args.experiment, &opts) else {
        eprintln!("hydra sim: unknown experiment {:?}", args.experiment);
        return ExitCode::from(2);
    };
    let mut out = std::io::stdout().lock();
    let res = if args.json {
        serde_json::to_writer_pretty(&mut out, &report)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(out))
    } else {
        write_table(&mut out, &report)
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hydra sim: cannot write the report: {e}");
            ExitCode::from(1)
        }
    }
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |x| format!("{x:.prec$}"))
}

/// Writes the report as a table for people.
pub fn write_table(out: &mut impl Write, r: &Report) -> std::io::Result<()> {
    writeln!(out, "{} — {} ({} seeds)", r.experiment, r.scenario, r.seeds)?;
    let sweep = r.experiment == "sweep";
    if sweep {
        write!(out, "{:>10} ", "size")?;
    }
    writeln!(
        out,
        "{:>3} {:<10} {:>8} {:>8} {:>10} {:>8} {:>9} {:>9} {:>8} {:>9}",
        "n",
        "arm",
        "ratio",
        "max",
        "dup bytes",
        "repairs",
        "requests",
        "excess s",
        "done",
        "delivered"
    )?;
    for row in &r.rows {
        let s = &row.summary;
        if sweep {
            write!(out, "{:>10} ", row.size)?;
        }
        writeln!(
            out,
            "{:>3} {:<10} {:>8} {:>8} {:>10.0} {:>8.2} {:>9.1} {:>9} {:>5}/{:<2} {:>9.3}",
            s.n,
            s.arm,
            opt(s.ratio_mean, 3),
            opt(s.ratio_max, 3),
            s.dup_bytes_mean,
            s.repairs_mean,
            s.requests_mean,
            opt(s.excess_mean, 3),
            s.completed_runs,
            s.seeds,
            s.completed_fraction,
        )?;
    }
    for f in &r.fit {
        writeln!(
            out,
            "fit {:<10} excess exponent {}, requests grow {:.2}x, largest mean excess {:.3} s",
            f.arm,
            f.exponent
                .map_or_else(|| "not measured".to_owned(), |e| format!("{e:.3}")),
            f.requests_growth,
            f.excess_max
        )?;
    }
    Ok(())
}
