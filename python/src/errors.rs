//! arenac's errors as Python exceptions. The classes live in `arenac/_errors.py` (a class
//! deriving from two bases, like `InvalidInput(InvalidArgument, ValueError)`, cannot be made
//! with `create_exception!`); each error carries the CLI's one-line message.

use arenac::RunError;
use arenac::stream::StreamError;
use arenac_compiler::OpError;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// Which `arenac` exception class an error raises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `arenac.Error`: anything else.
    Error,
    /// `arenac.NoSuchFile` (also a `FileNotFoundError`).
    NoSuchFile,
    /// `arenac.InvalidModel`: the file is not a valid model.
    InvalidModel,
    /// `arenac.Unsupported`: a valid model using what arenac has not implemented.
    Unsupported,
    /// `arenac.InvalidArgument` (a `ValueError`): a bad option.
    InvalidArgument,
    /// `arenac.InvalidInput` (an `InvalidArgument`): a feed of the wrong name, dtype or shape.
    InvalidInput,
    /// `arenac.MemoryLimitExceeded`: the plan does not fit the memory limit.
    MemoryLimitExceeded,
    /// `arenac.RunFailed`: a run found an invalid value (an index out of range...).
    RunFailed,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Error => "Error",
            Kind::NoSuchFile => "NoSuchFile",
            Kind::InvalidModel => "InvalidModel",
            Kind::Unsupported => "Unsupported",
            Kind::InvalidArgument => "InvalidArgument",
            Kind::InvalidInput => "InvalidInput",
            Kind::MemoryLimitExceeded => "MemoryLimitExceeded",
            Kind::RunFailed => "RunFailed",
        }
    }
}

/// An error on its way to Python: the class and the one-line message. Built without the GIL
/// (inside `Python::detach`), raised once the GIL is back.
#[derive(Debug)]
pub struct Failure {
    /// The exception class.
    pub kind: Kind,
    /// The message, as the CLI prints it after `error: `.
    pub message: String,
}

impl Failure {
    /// A failure of `kind` with `message`, its CLI and Rust advice said in this package's
    /// terms ([`python_terms`]).
    pub fn new(kind: Kind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: python_terms(&message.into()),
        }
    }
}

/// The library's messages name the CLI's `--shape` and the Rust `CompileOptions`; a Python
/// user binds shapes with `shapes=` when creating the session.
fn python_terms(message: &str) -> String {
    const TERMS: &[(&str, &str)] = &[
        (
            "recompile with --shape / CompileOptions::with_shape to change it",
            "create the session with shapes={...} to change it",
        ),
        ("give one with --shape", "give one with shapes={...}"),
        (
            "bind them with --shape:",
            "bind them with shapes= when creating the session:",
        ),
        ("pass --shape ", "pass shapes= "),
    ];
    let mut out = TERMS
        .iter()
        .fold(message.to_string(), |m, (cli, py)| m.replace(cli, py));
    if let Some(rest) = out.strip_prefix("--shape ") {
        out = format!("shapes: {rest}");
    }
    out
}

impl From<arenac::Error> for Failure {
    fn from(e: arenac::Error) -> Failure {
        use arenac::Error as E;
        let kind = match &e {
            E::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Kind::NoSuchFile
            }
            E::Io { .. } | E::System { .. } | E::PlanInternal(_) => Kind::Error,
            E::UnsupportedOp { .. } | E::UnsupportedOpset { .. } | E::UnsupportedDType { .. } => {
                Kind::Unsupported
            }
            E::Node {
                source: OpError::Unsupported(_),
                ..
            } => Kind::Unsupported,
            E::ShapeSpec { .. } | E::MemoryLimitSpec { .. } => Kind::InvalidArgument,
            E::InputShape { .. } | E::InputType { .. } => Kind::InvalidInput,
            E::MemoryBudget(_) => Kind::MemoryLimitExceeded,
            _ => Kind::InvalidModel,
        };
        Failure::new(kind, e.to_string())
    }
}

impl From<RunError> for Failure {
    fn from(e: RunError) -> Failure {
        let kind = match &e {
            RunError::UnknownInput { .. }
            | RunError::DuplicateInput { .. }
            | RunError::MissingInput { .. }
            | RunError::WrongDType { .. }
            | RunError::WrongShape { .. }
            | RunError::InputCount { .. }
            | RunError::DataLength { .. } => Kind::InvalidInput,
            RunError::TooManyThreads { .. } => Kind::InvalidArgument,
            RunError::OutOfRange { .. } | RunError::Unrunnable { .. } => Kind::RunFailed,
            _ => Kind::Error,
        };
        Failure::new(kind, e.to_string())
    }
}

impl From<StreamError> for Failure {
    fn from(e: StreamError) -> Failure {
        match e {
            StreamError::Compile(e) => e.into(),
            StreamError::Run(e) => e.into(),
            StreamError::Io(e) => {
                let kind = match &e {
                    arenac::io::IoError::Io { source, .. }
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        Kind::NoSuchFile
                    }
                    arenac::io::IoError::Io { .. } => Kind::Error,
                    _ => Kind::InvalidInput,
                };
                Failure::new(kind, e.to_string())
            }
            StreamError::Input(m) => Failure::new(Kind::InvalidInput, m),
        }
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        Python::attach(|py| {
            let class = py
                .import("arenac._errors")
                .and_then(|m| m.getattr(f.kind.class_name()))
                .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
            match class {
                Ok(class) => PyErr::from_type(class, f.message),
                Err(e) => e,
            }
        })
    }
}
