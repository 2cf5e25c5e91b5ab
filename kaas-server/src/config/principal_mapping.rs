//! `ssl.principal.mapping.rules` (KIP-371), in Kafka's syntax: how a client
//! certificate's subject (its distinguished name, RFC 2253 as Java writes it) becomes
//! the short name its principal is `User:` of.
//!
//! A list of rules, tried in order; the first that matches decides:
//! - `RULE:pattern/replacement/` — when the Java-style regular expression `pattern`
//!   matches the whole name, the name becomes `replacement` (`$1`… are the pattern's
//!   groups); `/L` or `/U` after it lowers or uppers the result;
//! - `DEFAULT` — the name as it is.
//!
//! With rules given and none matching, the connection is refused (as Kafka refuses the
//! authentication). Rules are separated by commas, or by whitespace; a `/` or `,`
//! inside a pattern is escaped as `\/`, and a pattern may hold commas anyway (the
//! parser reads a whole rule at a time, as Kafka's does).

use regex::Regex;

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        replacement: String,
        case: Case,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// Parsed `ssl.principal.mapping.rules`.
#[derive(Debug, Clone)]
pub struct PrincipalMapping {
    rules: Vec<Rule>,
}

impl Default for PrincipalMapping {
    /// Kafka's default: `DEFAULT` (the name as it is).
    fn default() -> Self {
        PrincipalMapping {
            rules: vec![Rule::Default],
        }
    }
}

impl PrincipalMapping {
    /// Parses the rules; a precise message for the first one that is not a rule.
    pub fn parse(spec: &str) -> Result<PrincipalMapping, String> {
        let mut rules = Vec::new();
        let mut rest = spec.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) =
                    until_slash(after).ok_or_else(|| format!("{rest:?}: a rule is RULE:pattern/replacement/[LU]"))?;
                let (replacement, after) =
                    until_slash(after).ok_or_else(|| format!("{rest:?}: a rule is RULE:pattern/replacement/[LU]"))?;
                let (case, after) = match after.chars().next() {
                    Some('L') => (Case::Lower, &after[1..]),
                    Some('U') => (Case::Upper, &after[1..]),
                    _ => (Case::Keep, after),
                };
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| format!("RULE pattern {pattern:?} is not a regular expression: {e}"))?;
                let groups = pattern.captures_len() - 1;
                rules.push(Rule::Replace {
                    pattern,
                    replacement: java_replacement(&replacement, groups),
                    case,
                });
                rest = after;
            } else {
                return Err(format!("{rest:?}: expected RULE:pattern/replacement/[LU] or DEFAULT"));
            }
            let trimmed = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
            if trimmed.len() == rest.len() && !rest.is_empty() {
                return Err(format!("{rest:?}: rules are separated by commas"));
            }
            rest = trimmed;
        }
        if rules.is_empty() {
            return Err("no rules (Kafka's default is DEFAULT)".into());
        }
        Ok(PrincipalMapping { rules })
    }

    /// The short name `subject` maps to; None when no rule applies.
    pub fn apply(&self, subject: &str) -> Option<String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Some(subject.to_string()),
                Rule::Replace {
                    pattern,
                    replacement,
                    case,
                } => {
                    if pattern.is_match(subject) {
                        let name = pattern.replace(subject, replacement.as_str()).into_owned();
                        return Some(match case {
                            Case::Keep => name,
                            Case::Lower => name.to_lowercase(),
                            Case::Upper => name.to_uppercase(),
                        });
                    }
                }
            }
        }
        None
    }
}

/// The text up to the next unescaped `/`, and what follows it. As Kafka's rule
/// grammar (`(\\.|[^\\/])*`): a backslash escapes the character after it, kept as it is
/// (`\\` stays a regex's literal backslash), except `\/`, which is a plain `/`.
fn until_slash(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, '/')) => out.push('/'),
                Some((_, next)) => {
                    out.push('\\');
                    out.push(next);
                }
                None => return None,
            },
            '/' => return Some((out, &s[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// A Java replacement as Kafka applies it, in the regex crate's syntax: `$n` (all its
/// digits) is group n when the pattern has that many groups, else the literal text
/// `$n` (Kafka's `escapeLiteralBackReferences`); `\$` is a literal dollar. The regex
/// crate would read `$1a` as a group named `1a`: groups are written `${n}`.
fn java_replacement(r: &str, groups: usize) -> String {
    let mut out = String::new();
    let mut chars = r.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some() => {
                let next = chars.next().expect("peeked");
                if next == '$' {
                    out.push_str("$$");
                } else {
                    out.push(next);
                }
            }
            '$' if chars.peek().is_some_and(|d| d.is_ascii_digit()) => {
                let mut n = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    n.push(*d);
                    chars.next();
                }
                if n.parse::<usize>().is_ok_and(|g| g <= groups) {
                    out.push_str(&format!("${{{n}}}"));
                } else {
                    out.push_str(&format!("$${n}"));
                }
            }
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_documented_examples_map_as_kafka_maps_them() {
        // From Kafka's security documentation (KIP-371).
        let rules = PrincipalMapping::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT",
        )
        .unwrap();
        assert_eq!(
            rules
                .apply("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .as_deref(),
            Some("serviceuser")
        );
        assert_eq!(
            rules
                .apply("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .as_deref(),
            Some("adminuser@admin")
        );
        assert_eq!(rules.apply("OU=x,cn=Mixed.Case").as_deref(), Some("mixed.case"));
        assert_eq!(rules.apply("O=nobody").as_deref(), Some("O=nobody"), "DEFAULT");
    }

    #[test]
    fn no_rule_matching_refuses_and_bad_rules_are_refused_at_start() {
        let rules = PrincipalMapping::parse("RULE:^CN=(.*)$/$1/U").unwrap();
        assert_eq!(rules.apply("CN=writer").as_deref(), Some("WRITER"));
        assert_eq!(rules.apply("O=x,CN=writer"), None);
        assert!(PrincipalMapping::parse("RULE:^CN=(.*$/$1/")
            .unwrap_err()
            .contains("not a regular expression"));
        assert!(PrincipalMapping::parse("RULE:^CN=x$").is_err());
        assert!(PrincipalMapping::parse("NONSENSE").is_err());
        assert!(PrincipalMapping::parse("").is_err());
    }

    #[test]
    fn escaped_slashes_and_java_group_references() {
        let rules = PrincipalMapping::parse(r"RULE:^CN=([^,]*)\/(.*)$/$1a-$2\$/").unwrap();
        assert_eq!(rules.apply("CN=x/y").as_deref(), Some("xa-y$"));
        // A group the pattern does not have is literal text, as Kafka leaves it.
        let rules = PrincipalMapping::parse(r"RULE:^CN=(.*)$/$12-$3/").unwrap();
        assert_eq!(rules.apply("CN=x").as_deref(), Some("$12-$3"));
        // An escaped backslash is a literal backslash of the pattern.
        let rules = PrincipalMapping::parse(r"RULE:^CN=a\\(.*)$/$1/").unwrap();
        assert_eq!(rules.apply(r"CN=a\b").as_deref(), Some("b"));
        assert_eq!(PrincipalMapping::default().apply("CN=a").as_deref(), Some("CN=a"));
    }
}
