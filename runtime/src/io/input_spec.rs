//! `--input NAME=FILE` / `--input FILE`: telling the input's name from the file.
//!
//! Exported models name inputs `gpu_0/data_0`, `input:0`, even `a=b`, and files may hold `=`
//! too, so no character tells a name from a path. The rule, using the model's input names:
//! 1. if SPEC starts with `NAME=` for a graph input NAME, the longest such NAME is the name
//!    and the rest is the file (write `NAME=FILE` to give a file that itself starts with
//!    `NAME=`);
//! 2. otherwise a SPEC without `=`, or one that is an existing file, is a file for the next
//!    graph input in order;
//! 3. otherwise it is an error naming both readings.

/// One `--input` argument, split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputSpec<'a> {
    /// The graph input named, `None` for the next one in order.
    pub name: Option<&'a str>,
    /// The file.
    pub file: &'a str,
}

/// Splits `spec` by the rule above; `names` are the graph's input names, `is_file` tells
/// whether a path names an existing file. The error is one line.
pub fn split_input_spec<'a>(
    spec: &'a str,
    names: &[String],
    is_file: impl Fn(&str) -> bool,
) -> Result<InputSpec<'a>, String> {
    let named = names
        .iter()
        .filter_map(|n| {
            let file = spec.strip_prefix(n.as_str())?.strip_prefix('=')?;
            Some((
                n.len(),
                InputSpec {
                    name: Some(&spec[..n.len()]),
                    file,
                },
            ))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, s)| s);
    if let Some(s) = named {
        if s.file.is_empty() {
            return Err(format!(
                "--input {spec}: no file (expected NAME=FILE or FILE)"
            ));
        }
        return Ok(s);
    }
    match spec.split_once('=') {
        None if spec.is_empty() => Err("--input: empty (expected NAME=FILE or FILE)".into()),
        Some(_) if !is_file(spec) => {
            let (first, _) = spec.split_once('=').unwrap_or((spec, ""));
            Err(format!(
                "--input {spec}: no graph input is named '{first}' and no file {spec} exists \
                 (inputs: {}); write NAME=FILE with one of them, or FILE alone for the inputs \
                 in order",
                names.join(", ")
            ))
        }
        _ => Ok(InputSpec {
            name: None,
            file: spec,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split<'a>(spec: &'a str, names: &[&str], files: &[&str]) -> Result<InputSpec<'a>, String> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        split_input_spec(spec, &names, |p| files.contains(&p))
    }

    fn named<'a>(name: &'a str, file: &'a str) -> InputSpec<'a> {
        InputSpec {
            name: Some(name),
            file,
        }
    }

    fn positional(file: &str) -> InputSpec<'_> {
        InputSpec { name: None, file }
    }

    #[test]
    fn names_with_slash_colon_and_equals() {
        let names = ["gpu_0/data_0", "input:0", "a=b", "a"];
        assert_eq!(
            split("gpu_0/data_0=in/x.npy", &names, &[]),
            Ok(named("gpu_0/data_0", "in/x.npy"))
        );
        assert_eq!(
            split("input:0=x.pb", &names, &[]),
            Ok(named("input:0", "x.pb"))
        );
        // The longest input name wins; the rest, '=' and all, is the file.
        assert_eq!(split("a=b=c.npy", &names, &[]), Ok(named("a=b", "c.npy")));
        assert_eq!(split("a=c=d.npy", &names, &[]), Ok(named("a", "c=d.npy")));
        // A name beats an existing file of the same spelling.
        assert_eq!(
            split("a=c.npy", &names, &["a=c.npy"]),
            Ok(named("a", "c.npy"))
        );
    }

    #[test]
    fn files_in_order() {
        let names = ["x"];
        assert_eq!(split("dir/x.npy", &names, &[]), Ok(positional("dir/x.npy")));
        // A path holding '=' that names no input is a file when it exists...
        assert_eq!(
            split("runs/lr=0.1/in.npy", &names, &["runs/lr=0.1/in.npy"]),
            Ok(positional("runs/lr=0.1/in.npy"))
        );
        // ...and an error naming both readings when it does not.
        let err = split("y=in.npy", &names, &[]).unwrap_err();
        assert_eq!(
            err,
            "--input y=in.npy: no graph input is named 'y' and no file y=in.npy exists \
             (inputs: x); write NAME=FILE with one of them, or FILE alone for the inputs in \
             order"
        );
        assert!(split("x=", &names, &[]).unwrap_err().contains("no file"));
        assert!(split("", &names, &[]).is_err());
    }
}
