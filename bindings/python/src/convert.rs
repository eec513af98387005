//! Python objects ⇄ JSON values, at the boundary.
//!
//! Inputs may be Python objects (`dict`, `list`, `tuple`, `str`, `int`, `float`,
//! `bool`, `None`); anything else — a set, a NaN, a dict with a non-string key, an
//! integer beyond 64 bits, nesting deeper than [`MAX_DEPTH`] (a list that contains
//! itself included) — is refused with the member it was found at, never a crash.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// Deeper nesting is refused, as JSON parsing refuses it.
pub const MAX_DEPTH: usize = 128;

/// `obj` as a JSON value; `Err((path, message))` names the offending member under
/// `root` (`evidence[3].score`).
pub fn from_py(obj: &Bound<'_, PyAny>, root: &str) -> Result<Value, (String, String)> {
    let mut path = root.to_owned();
    value(obj, &mut path, 0).map_err(|message| (path, message))
}

fn value(obj: &Bound<'_, PyAny>, path: &mut String, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return s
            .to_cow()
            .map(|s| Value::String(s.into_owned()))
            .map_err(|_| "a string that is not valid Unicode (lone surrogate)".to_owned());
    }
    // `bool` is a subclass of `int`: test it first.
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        if let Ok(n) = i.extract::<i64>() {
            return Ok(Value::Number(n.into()));
        }
        return i
            .extract::<u64>()
            .map(|n| Value::Number(n.into()))
            .map_err(|_| "an integer out of the 64-bit range".to_owned());
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| "a float that is not finite (NaN or infinity)".to_owned());
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(format!("a key that is not a string ({})", type_name(&k)));
            };
            let key = key
                .to_cow()
                .map_err(|_| "a key that is not valid Unicode".to_owned())?;
            let key: &str = &key;
            let len = path.len();
            path.push('.');
            path.push_str(key);
            let item = value(&v, path, depth + 1)?;
            path.truncate(len);
            map.insert(key.to_owned(), item);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return sequence(l.iter(), path, depth);
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return sequence(t.iter(), path, depth);
    }
    Err(format!(
        "{} is not a JSON value (use dict, list, str, int, float, bool or None)",
        type_name(obj)
    ))
}

fn sequence<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    path: &mut String,
    depth: usize,
) -> Result<Value, String> {
    let mut out = Vec::new();
    for (i, item) in items.enumerate() {
        let len = path.len();
        path.push('[');
        path.push_str(itoa::Buffer::new().format(i));
        path.push(']');
        out.push(value(&item, path, depth + 1)?);
        path.truncate(len);
    }
    Ok(Value::Array(out))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| format!("`{n}`"))
        .unwrap_or_else(|_| "an object".to_owned())
}

/// A JSON value as Python objects.
pub fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// Any serializable value as Python objects, through its JSON form.
pub fn serialize_to_py<'py, T: serde::Serialize>(
    py: Python<'py>,
    v: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(v)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    to_py(py, &value)
}
