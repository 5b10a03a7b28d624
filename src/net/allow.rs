//! `claude-sandbox allow HOST`: a host added to `allow` in `[network]` of the user's configuration
//! file, the one step a denial alert names.
//!
//! Guards against two things. An edit that says something else than it means or breaks the file:
//! the entry is checked as a host pattern first, the file is edited as text (comments and order
//! stay), and the result is parsed again and must list the host, or nothing is written. And a
//! command suggested to the human that does more than allow a host: the suggestion is made only for
//! a name that is a valid pattern (letters, digits, `-`, `_`, dots, or an IP address), never for one
//! the jail chose with other characters in it (`suggestion`).

use super::pattern::Pattern;

/// What adding `host` to a configuration text did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Edit {
    /// The new text.
    Added(String),
    /// `allow` in `[network]` already lists it.
    Already,
}

/// Why the text was not edited.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EditError {
    #[error(transparent)]
    Pattern(#[from] super::error::BadPattern),
    #[error("it is not valid TOML now ({0}); fix it first")]
    Invalid(String),
    #[error(
        "its [network] table is written in a form this command does not edit (a dotted key or an \
         inline table); add \"{0}\" to `allow` in [network] by hand"
    )]
    Form(String),
}

/// The command a denial suggests for `host` (normalised), if `host` is a pattern (so the command
/// is safe to paste).
pub(crate) fn suggestion(host: &str) -> Option<String> {
    Pattern::parse(host)
        .is_ok()
        .then(|| format!("claude-sandbox allow {host}"))
}

/// `text` (a configuration file's, possibly empty) with `host` added to `allow` in `[network]`.
pub(crate) fn add(text: &str, host: &str) -> Result<Edit, EditError> {
    Pattern::parse(host)?;
    let entry = super::pattern::normalize(host);
    let listed = |t: &str| -> Result<bool, EditError> {
        let v: toml::Table = toml::from_str(t).map_err(|e| EditError::Invalid(e.to_string()))?;
        Ok(v.get("network")
            .and_then(|n| n.get("allow"))
            .and_then(toml::Value::as_array)
            .is_some_and(|a| {
                a.iter()
                    .any(|x| x.as_str().map(super::pattern::normalize) == Some(entry.clone()))
            }))
    };
    if listed(text)? {
        return Ok(Edit::Already);
    }
    let quoted = format!("\"{entry}\"");
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| is_header(l, "network"));
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_string()).collect();
    match header {
        None => {
            if out.last().is_some_and(|l| !l.trim().is_empty()) {
                out.push(String::new());
            }
            out.push("[network]".into());
            out.push(format!("allow = [{quoted}]"));
        }
        Some(h) => {
            let end = (h + 1..lines.len())
                .find(|&i| lines[i].trim_start().starts_with('['))
                .unwrap_or(lines.len());
            let allow = (h + 1..end).find(|&i| {
                let l = lines[i].trim_start();
                l.strip_prefix("allow")
                    .is_some_and(|r| r.trim_start().starts_with('='))
            });
            match allow {
                // The new entry goes first in the array: one line or many, `[` is on this one.
                Some(i) => match lines[i].find('[') {
                    Some(b) => {
                        let (before, after) = lines[i].split_at(b + 1);
                        let sep = if after.trim_start().starts_with(']') {
                            ""
                        } else {
                            ", "
                        };
                        out[i] = format!("{before}{quoted}{sep}{after}");
                    }
                    None => return Err(EditError::Form(entry)),
                },
                None => out.insert(h + 1, format!("allow = [{quoted}]")),
            }
        }
    }
    let mut new = out.join("\n");
    new.push('\n');
    if listed(&new).unwrap_or(false) {
        Ok(Edit::Added(new))
    } else {
        Err(EditError::Form(entry))
    }
}

/// Whether `line` is the header `[name]` (spaces and a comment allowed).
fn is_header(line: &str, name: &str) -> bool {
    let l = line.split('#').next().unwrap_or_default().trim();
    l.strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .is_some_and(|n| n.trim() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn added(text: &str, host: &str) -> String {
        match add(text, host).unwrap() {
            Edit::Added(t) => t,
            Edit::Already => panic!("{host} already there in {text}"),
        }
    }

    #[test]
    fn a_host_is_added_where_it_belongs_and_the_rest_stays() {
        assert_eq!(
            added("", "API.Example.com."),
            "[network]\nallow = [\"api.example.com\"]\n"
        );
        assert_eq!(
            added("# mine\nhidden = [\"x\"]\n", "a.test"),
            "# mine\nhidden = [\"x\"]\n\n[network]\nallow = [\"a.test\"]\n"
        );
        assert_eq!(
            added(
                "[network]  # net\nmode = \"allowlist\"\n\n[other]\nallow = 1\n",
                "a.test"
            ),
            "[network]  # net\nallow = [\"a.test\"]\nmode = \"allowlist\"\n\n[other]\nallow = 1\n"
        );
        assert_eq!(
            added("[network]\nallow = []\n", "*.b.test"),
            "[network]\nallow = [\"*.b.test\"]\n"
        );
        assert_eq!(
            added("[network]\nallow = [\"x.test\"] # kept\n", "10.0.0.1"),
            "[network]\nallow = [\"10.0.0.1\", \"x.test\"] # kept\n"
        );
        assert_eq!(
            added("[network]\nallow = [\n  \"x.test\",\n]\n", "a.test"),
            "[network]\nallow = [\"a.test\", \n  \"x.test\",\n]\n"
        );
        assert_eq!(
            add("[network]\nallow = [\"A.test\"]\n", "a.test"),
            Ok(Edit::Already)
        );
    }

    #[test]
    fn nothing_is_written_that_would_not_mean_it() {
        assert!(matches!(
            add("", "a.test; rm -rf ~"),
            Err(EditError::Pattern(_))
        ));
        assert!(matches!(
            add("[network\n", "a.test"),
            Err(EditError::Invalid(_))
        ));
        for form in [
            "network.mode = \"allowlist\"\n",
            "network = { mode = \"allowlist\" }\n",
            "[network]\nallow = \"x\"\n",
        ] {
            assert_eq!(
                add(form, "a.test"),
                Err(EditError::Form("a.test".into())),
                "{form}"
            );
        }
    }

    #[test]
    fn only_a_plain_name_is_suggested() {
        assert_eq!(
            suggestion("api.example.com").as_deref(),
            Some("claude-sandbox allow api.example.com")
        );
        assert_eq!(
            suggestion("::1").as_deref(),
            Some("claude-sandbox allow ::1")
        );
        for bad in ["$(touch x).test", "a b.test", "a.test;id", "`id`", ""] {
            assert_eq!(suggestion(bad), None, "{bad}");
        }
    }
}
