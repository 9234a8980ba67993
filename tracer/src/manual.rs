//! The man pages and shell completions a release ships, made from the binary's own clap
//! definitions, so that they cannot drift from the flags the binary takes.
//!
//! `tracer __manual DIR` writes them (xtask's `dist` runs it on the binary it packages):
//! the word is read before clap parses, so the generator is in no help, page or completion.

use std::{fs, io, path::Path};

use clap_complete::Shell;

/// The argument that asks for the manual instead of a command.
pub const ARG: &str = "__manual";

/// Write `DIR/man1/tracer.1` and `tracer-SUBCOMMAND.1` for each visible subcommand, and
/// `DIR/completions/{tracer.bash, _tracer, tracer.fish}`; returns the files written,
/// relative to `dir`.
///
/// # Errors
/// When a file cannot be written.
pub fn write(cmd: clap::Command, dir: &Path) -> io::Result<Vec<String>> {
    let mut written = Vec::new();
    let man = dir.join("man1");
    fs::create_dir_all(&man)?;
    // `tracer help` needs no page of its own; once built, a subcommand's display name is
    // `tracer-capture`, the page's name and title, as git's pages are named.
    let mut pages_of = cmd.clone().disable_help_subcommand(true);
    pages_of.build();
    let mut pages = vec![pages_of.clone()];
    pages.extend(
        pages_of
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .cloned(),
    );
    for page in pages {
        let mut man_page =
            clap_mangen::Man::new(page).source(format!("tracer {}", crate::build_info::VERSION));
        // The build's date, never the clock's: two builds of one commit write one page.
        if crate::build_info::DATE != "unknown" {
            man_page = man_page.date(crate::build_info::DATE);
        }
        let mut out = Vec::new();
        man_page.render(&mut out)?;
        let file = format!("man1/{}", man_page.get_filename());
        fs::write(dir.join(&file), out)?;
        written.push(file);
    }
    let mut cmd = cmd;
    cmd.build();
    let completions = dir.join("completions");
    fs::create_dir_all(&completions)?;
    for (shell, file) in [
        (Shell::Bash, "tracer.bash"),
        (Shell::Zsh, "_tracer"),
        (Shell::Fish, "tracer.fish"),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cmd, "tracer", &mut out);
        fs::write(completions.join(file), out)?;
        written.push(format!("completions/{file}"));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_per_subcommand_and_a_completion_per_shell() {
        let cmd = clap::Command::new("tracer")
            .version("1")
            .about("top")
            .subcommand(
                clap::Command::new("serve").about("serve it").arg(
                    clap::Arg::new("listen")
                        .long("listen")
                        .help("where to listen"),
                ),
            )
            .subcommand(clap::Command::new("secret").hide(true));
        let dir = std::env::temp_dir().join(format!("tracer-manual-{}", std::process::id()));
        let files = write(cmd, &dir).unwrap();
        assert_eq!(
            files,
            [
                "man1/tracer.1",
                "man1/tracer-serve.1",
                "completions/tracer.bash",
                "completions/_tracer",
                "completions/tracer.fish"
            ]
        );
        let page = fs::read_to_string(dir.join("man1/tracer-serve.1")).unwrap();
        assert!(
            page.contains("tracer\\-serve") && page.contains("listen"),
            "{page}"
        );
        let bash = fs::read_to_string(dir.join("completions/tracer.bash")).unwrap();
        assert!(
            bash.contains("--listen") && bash.contains("serve"),
            "{bash}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
