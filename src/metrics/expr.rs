//! A metric's `MetricExpr` parsed and evaluated: arithmetic (`+ - * / % ^`,
//! parentheses, `min(a, b)`, `max(a, b)`) over numbers and names, by `evalexpr`.
//!
//! Before the parser sees it, the formula is rewritten: every number becomes a
//! floating-point literal (the parser would divide integers as integers: `1/2` is 0),
//! and every `kind@EVENT@` reference becomes `@N` (a perf name may hold a hyphen,
//! which the parser reads as a minus; no plain name starts with `@`).

use evalexpr::{
    build_operator_tree, error::EvalexprResultValue, Context as EvalContext, DefaultNumericTypes,
    EvalexprError, EvalexprResult, Node, Value,
};

use super::formula::number_len;

/// The longest formula read (perf's longest metrics are about 1,500 bytes).
pub(super) const MAX_LEN: usize = 4096;

/// The deepest nesting of parentheses read.
pub(super) const MAX_NESTING: usize = 64;

/// The most operators a formula may hold. With [`MAX_NESTING`], it bounds the depth
/// of the parsed tree, which the parser and the evaluator walk recursively: whoever
/// wrote the file, they stay within a small thread's stack.
pub(super) const MAX_OPERATORS: usize = 128;

/// A parsed formula and the names it uses.
#[derive(Debug, Clone)]
pub(super) struct Formula {
    tree: Node<DefaultNumericTypes>,
    /// The identifiers the tree reads, each once: the order of [`Formula::eval`]'s
    /// values.
    ids: Vec<String>,
    /// The same names as the formula writes them (`@N` back to `kind@EVENT@`).
    names: Vec<String>,
}

impl Formula {
    /// Parses `expr`, or says why it does not parse.
    pub(super) fn parse(expr: &str) -> Result<Formula, String> {
        if expr.len() > MAX_LEN {
            return Err(format!(
                "MetricExpr is {} bytes; bfperf reads formulas of at most {MAX_LEN}",
                expr.len()
            ));
        }
        let (text, refs) = rewritten(expr)?;
        let tree = build_operator_tree::<DefaultNumericTypes>(&text)
            .map_err(|e| format!("MetricExpr does not parse: {e}"))?;
        let mut ids: Vec<String> = Vec::new();
        for id in tree.iter_variable_identifiers() {
            if !ids.iter().any(|i| i == id) {
                ids.push(id.to_string());
            }
        }
        if tree
            .iter_function_identifiers()
            .any(|f| !FUNCTIONS.contains(&f))
        {
            return Err(format!(
                "MetricExpr does not parse: its functions are {}",
                FUNCTIONS.join(", ")
            ));
        }
        ids.sort();
        let names = ids
            .iter()
            .map(
                |id| match id.strip_prefix('@').and_then(|n| n.parse::<usize>().ok()) {
                    Some(n) => refs[n].clone(),
                    None => id.clone(),
                },
            )
            .collect();
        Ok(Formula { tree, ids, names })
    }

    /// The names the formula uses, each once, in the order `eval` takes their values.
    pub(super) fn names(&self) -> &[String] {
        &self.names
    }

    /// The formula's value for these values of its names, or why it has none (a
    /// division by zero, a comparison).
    pub(super) fn eval(&self, values: &[f64]) -> Result<f64, String> {
        let slots = Slots {
            ids: &self.ids,
            values: values.iter().map(|v| Value::Float(*v)).collect(),
        };
        let v = self
            .tree
            .eval_with_context(&slots)
            .and_then(|v| v.as_number())
            .map_err(|e| format!("the formula has no number: {e}"))?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err("division by zero (nothing counted)".to_string())
        }
    }
}

/// The functions a formula may call (perf's `min` and `max`).
const FUNCTIONS: &[&str] = &["min", "max"];

/// The formula as the parser reads it, and the `kind@EVENT@` references its `@N`
/// stand for.
pub(super) fn rewritten(expr: &str) -> Result<(String, Vec<String>), String> {
    let mut out = String::with_capacity(expr.len() + 16);
    let mut refs: Vec<String> = Vec::new();
    let (mut depth, mut operators) = (0usize, 0usize);
    let mut rest = expr;
    while let Some(c) = rest.chars().next() {
        let len = if c.is_ascii_alphabetic() || c == '_' {
            let mut n = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if rest[n..].starts_with('@') {
                let Some(end) = rest[n + 1..].find('@') else {
                    return Err(format!(
                        "MetricExpr does not parse: '{}' has no closing @",
                        &rest[..rest.len().min(n + 32)]
                    ));
                };
                n += end + 2;
                let slot = match refs.iter().position(|r| *r == rest[..n]) {
                    Some(slot) => slot,
                    None => {
                        refs.push(rest[..n].to_string());
                        refs.len() - 1
                    }
                };
                out.push('@');
                out.push_str(&slot.to_string());
            } else {
                out.push_str(&rest[..n]);
            }
            n
        } else if c.is_ascii_digit() || c == '.' {
            let n = number_len(rest);
            match rest[..n].parse::<f64>() {
                Ok(v) if v.is_finite() => {
                    let plain = v.to_string();
                    out.push_str(&plain);
                    if !plain.contains('.') {
                        out.push_str(".0");
                    }
                }
                Ok(_) => {
                    return Err(format!(
                        "MetricExpr does not parse: {} is too large a number",
                        &rest[..n]
                    ))
                }
                Err(_) => {
                    return Err(format!(
                        "MetricExpr does not parse: '{}' is no number",
                        &rest[..n]
                    ))
                }
            }
            n
        } else {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                '+' | '-' | '*' | '/' | '%' | '^' | '<' | '>' | '=' | '!' | '&' | '|' | ','
                | ';' => operators += 1,
                _ => {}
            }
            if depth > MAX_NESTING || operators > MAX_OPERATORS {
                return Err(format!(
                    "MetricExpr nests deeper than {MAX_NESTING} parentheses or has more than {MAX_OPERATORS} operators; split it into metrics that name each other"
                ));
            }
            out.push(c);
            c.len_utf8()
        };
        rest = &rest[len..];
    }
    Ok((out, refs))
}

/// The values of a formula's names, by identifier.
struct Slots<'a> {
    ids: &'a [String],
    values: Vec<Value>,
}

impl EvalContext for Slots<'_> {
    type NumericTypes = DefaultNumericTypes;

    fn get_value(&self, identifier: &str) -> Option<&Value> {
        let i = self.ids.iter().position(|id| id == identifier)?;
        self.values.get(i)
    }

    fn call_function(&self, identifier: &str, argument: &Value) -> EvalexprResultValue {
        let pick = match identifier {
            "min" => f64::min,
            "max" => f64::max,
            _ => {
                return Err(EvalexprError::FunctionIdentifierNotFound(
                    identifier.to_string(),
                ))
            }
        };
        let args = argument.as_fixed_len_tuple(2)?;
        Ok(Value::Float(pick(
            args[0].as_number()?,
            args[1].as_number()?,
        )))
    }

    fn are_builtin_functions_disabled(&self) -> bool {
        true
    }

    fn set_builtin_functions_disabled(&mut self, _disabled: bool) -> EvalexprResult<()> {
        Err(EvalexprError::BuiltinFunctionsCannotBeEnabled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(expr: &str, values: &[f64]) -> Option<f64> {
        Formula::parse(expr).unwrap().eval(values).ok()
    }

    #[test]
    fn numbers_are_read_as_perf_writes_them_and_divide_as_reals() {
        assert_eq!(value("1/2", &[]), Some(0.5));
        assert_eq!(value("x * 1e9", &[2.0]), Some(2e9));
        assert_eq!(value("x / 1e-3 + 2.5E+2", &[1.0]), Some(1250.0));
        assert_eq!(value("-x + .5", &[1.0]), Some(-0.5));
        assert_eq!(value("min(x, 3) + max(x, 3)", &[1.0]), Some(4.0));
        assert_eq!(value("x / 0", &[1.0]), None);
        assert_eq!(value("x > 0", &[1.0]), None);
        assert!(Formula::parse("1e999 * x").is_err());
    }

    #[test]
    fn references_keep_their_spelling_and_names_are_left_alone() {
        let f = Formula::parse("perf@cpu-clock@ * PLL_N1e9 + llt@X@ - perf@cpu-clock@").unwrap();
        assert_eq!(f.names(), ["perf@cpu-clock@", "llt@X@", "PLL_N1e9"]);
        assert_eq!(f.eval(&[3.0, 5.0, 2.0]), Ok(3.0 * 2.0 + 5.0 - 3.0));
        assert!(Formula::parse("llt@X + 1").is_err());
    }

    #[test]
    fn hostile_formulas_are_refused_before_they_can_run_deep() {
        let deep = |n| format!("{}x{}", "(".repeat(n), ")".repeat(n));
        let unary = |n| format!("{}x", "- ".repeat(n));
        let chain = |n| format!("x{}", " ^ x".repeat(n));
        let worst = |n| format!("{}{}x{}", "(".repeat(64), "- ".repeat(n), ")".repeat(64));
        let long = format!("x{}", "+x".repeat(MAX_LEN));
        // On a small stack (the exporter's threads have 2 MiB): the most that is
        // read runs, one more is refused before the parser sees it.
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                for (f, most) in [
                    (&deep as &dyn Fn(usize) -> String, MAX_NESTING),
                    (&unary, MAX_OPERATORS),
                    (&chain, MAX_OPERATORS),
                    (&worst, MAX_OPERATORS),
                ] {
                    assert_eq!(Formula::parse(&f(most)).unwrap().eval(&[1.0]), Ok(1.0));
                    let refused = Formula::parse(&f(most + 1)).unwrap_err();
                    assert!(refused.contains("nests deeper"), "{refused}");
                }
                assert!(Formula::parse(&long).unwrap_err().contains("at most"));
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(Formula::parse("sqrt(x)").unwrap_err().contains("min, max"));
        assert!(Formula::parse("str::from(x)").is_err());
    }
}
