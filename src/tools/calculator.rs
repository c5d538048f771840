//! Safe arithmetic: numbers, + - * / % ^, parentheses and unary minus. No names, no calls.

const MAX_LENGTH: usize = 1000;
const MAX_DEPTH: usize = 64;

/// Evaluates `expression`; the error says what is wrong with it.
pub fn evaluate(expression: &str) -> Result<f64, String> {
    if expression.len() > MAX_LENGTH {
        return Err(format!(
            "the expression is longer than {MAX_LENGTH} characters"
        ));
    }
    let mut parser = Parser {
        chars: expression.chars().collect(),
        at: 0,
        depth: 0,
    };
    let value = parser.sum()?;
    if parser.peek().is_some() {
        return Err(format!("unexpected `{}`", parser.chars[parser.at]));
    }
    if !value.is_finite() {
        return Err("the result is not a finite number".into());
    }
    Ok(value)
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    depth: usize,
}

impl Parser {
    /// The next character that is not white space.
    fn peek(&mut self) -> Option<char> {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
        self.chars.get(self.at).copied()
    }

    fn sum(&mut self) -> Result<f64, String> {
        let mut value = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.at += 1;
            let rhs = self.product()?;
            value = if op == '+' { value + rhs } else { value - rhs };
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<f64, String> {
        let mut value = self.power()?;
        while let Some(op @ ('*' | '/' | '%')) = self.peek() {
            self.at += 1;
            let rhs = self.power()?;
            if op != '*' && rhs == 0.0 {
                return Err("division by zero".into());
            }
            value = match op {
                '*' => value * rhs,
                '/' => value / rhs,
                _ => value % rhs,
            };
        }
        Ok(value)
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.unary()?;
        if self.peek() == Some('^') {
            self.at += 1;
            let exponent = self.power()?;
            return Ok(base.powf(exponent));
        }
        Ok(base)
    }

    fn unary(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('-') => {
                self.at += 1;
                self.nested(|p| p.unary()).map(|v| -v)
            }
            Some('+') => {
                self.at += 1;
                self.nested(|p| p.unary())
            }
            _ => self.primary(),
        }
    }

    fn nested(
        &mut self,
        inner: impl FnOnce(&mut Self) -> Result<f64, String>,
    ) -> Result<f64, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("the expression is nested too deeply".into());
        }
        let value = inner(self);
        self.depth -= 1;
        value
    }

    fn primary(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('(') => {
                self.at += 1;
                let value = self.nested(|p| p.sum())?;
                if self.peek() != Some(')') {
                    return Err("a `(` is not closed".into());
                }
                self.at += 1;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let start = self.at;
                while self
                    .chars
                    .get(self.at)
                    .is_some_and(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E'))
                {
                    self.at += 1;
                }
                let text: String = self.chars[start..self.at].iter().collect();
                text.parse()
                    .map_err(|_| format!("`{text}` is not a number"))
            }
            Some(c) => Err(format!("unexpected `{c}`")),
            None => Err("the expression ends too early".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::evaluate;

    #[test]
    fn arithmetic_follows_precedence() {
        assert_eq!(evaluate("1 + 2 * 3").unwrap(), 7.0);
        assert_eq!(evaluate("(1 + 2) * 3").unwrap(), 9.0);
        assert_eq!(evaluate("2 ^ 3 ^ 2").unwrap(), 512.0);
        assert_eq!(evaluate("-4 + 10 % 3").unwrap(), -3.0);
        assert_eq!(evaluate("1.5e2 / 3").unwrap(), 50.0);
    }

    #[test]
    fn anything_else_is_an_error_not_code() {
        for bad in [
            "1 / 0",
            "2 +",
            "abs(3)",
            "(1",
            "1 2",
            "__import__('os')",
            "",
            "9^9^9^9",
        ] {
            assert!(evaluate(bad).is_err(), "{bad}");
        }
        assert!(evaluate(&"(".repeat(100)).is_err());
    }
}
