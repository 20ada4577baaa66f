//! `capplan completions SHELL`: scripts a shell loads, completing commands and their flags.

mod common;

use common::{capplan, scratch};

#[test]
fn bash_completes_commands_and_their_flags() {
    let run = capplan(&["completions", "bash"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let dir = scratch("completions");
    let script = dir.join("capplan.bash");
    std::fs::write(&script, &run.stdout).unwrap();
    // What bash offers after `capplan so<TAB>` and `capplan solve --us<TAB>`.
    let probe = format!(
        "source '{}'; \
         COMP_WORDS=(capplan so); COMP_CWORD=1; _capplan capplan so capplan; echo \"${{COMPREPLY[@]}}\"; \
         COMP_WORDS=(capplan solve --us); COMP_CWORD=2; _capplan capplan --us solve; echo \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let Ok(out) = std::process::Command::new("bash")
        .args(["-c", &probe])
        .output()
    else {
        eprintln!("no bash here: the script's text is checked only");
        assert!(run.stdout.contains("_capplan"));
        return;
    };
    let offered = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = offered.lines().collect();
    assert_eq!(lines, vec!["solve", "--users"], "{offered}");
}

#[test]
fn every_shell_gets_a_script_and_an_unknown_one_exits_2() {
    for (shell, marker) in [
        ("zsh", "#compdef capplan"),
        ("fish", "complete -c capplan"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let run = capplan(&["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        assert!(run.stdout.contains(marker), "{shell}");
        assert!(run.stdout.contains("validate"), "{shell}");
    }
    let run = capplan(&["completions", "tcsh"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("tcsh") && run.stderr.contains("bash"));
}
