//! `placer zoo NAME --batch N [-o FILE]`

use anyhow::Context as _;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Network to generate (see --list).
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// Batch size.
    #[arg(long, short, default_value_t = 32)]
    batch: u64,
    /// Write the model here instead of to standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// List the available networks.
    #[arg(long)]
    list: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let Some(name) = args.name.filter(|_| !args.list) else {
        let width = placer_zoo::entries().iter().map(|e| e.name.len()).max().unwrap_or(0);
        for e in placer_zoo::entries() {
            outln!("{:<width$}  {}", e.name, e.description)?;
        }
        return Ok(());
    };
    let model = placer_zoo::build(&name, args.batch).with_context(|| format!("cannot generate '{name}'"))?;
    match args.output {
        Some(path) => {
            placer_ir::save_model(&model, &path)?;
            errln!(
                "wrote {} ({} nodes, {} tensors) to {}",
                model.name(),
                model.nodes().len(),
                model.tensors().len(),
                path.display()
            );
        }
        None => out!("{}", model.to_json())?,
    }
    Ok(())
}
