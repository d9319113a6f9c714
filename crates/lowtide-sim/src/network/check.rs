//! A scenario's checks: `FIGURE OP VALUE`, where FIGURE is `flow.NAME.F` or
//! `queue.SRC->DST.F`, OP one of `<`, `<=`, `>`, `>=`, and VALUE a number, another
//! figure, or `NUMBER * FIGURE`, each part apart by spaces:
//!
//! ```text
//! flow.probe.delay_ms < 20
//! flow.short.goodput_mbps > 1.5 * flow.long.goodput_mbps
//! queue.r1->r2.drops >= 1
//! ```
//!
//! A flow NAME with `count` > 1 stands for the mean over its instances (`NAME#i` for
//! one of them). Flow figures: [`FLOW_FIGURES`]; queue figures: [`QUEUE_FIGURES`].

use super::topology::Topology;
use serde::Serialize;

/// The figures of a flow a check can name.
pub const FLOW_FIGURES: &[&str] = &[
    "goodput_mbps",
    "bytes",
    "rtt_ms",
    "min_rtt_ms",
    "retrans",
    "cwnd",
    "delay_ms",
    "delay_p99_ms",
    "delay_max_ms",
    "transactions",
    "tps",
    "latency_ms",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "latency_max_ms",
];

/// The figures of a queue a check can name.
pub const QUEUE_FIGURES: &[&str] = &[
    "backlog_bytes",
    "backlog_max_packets",
    "sojourn_ms",
    "sojourn_max_ms",
    "drops",
    "ce_marks",
    "utilization",
    "jain",
];

/// What a figure belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Owner {
    /// A flow (or the mean of a `count` group).
    Flow,
    /// A queue (a port's egress qdisc).
    Queue,
}

/// A named figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// Flow or queue.
    pub owner: Owner,
    /// The flow's or queue's name.
    pub name: String,
    /// The figure.
    pub figure: String,
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// The right side: a number, or a number times a figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Rhs {
    /// A constant.
    Number(f64),
    /// `factor * figure`.
    Scaled(f64, Figure),
}

/// One check of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// As written.
    pub text: String,
    /// The figure compared.
    pub left: Figure,
    /// How.
    pub op: Op,
    /// With what.
    pub right: Rhs,
}

/// A check's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckResult {
    /// The check as written.
    pub check: String,
    /// The left figure's value.
    pub left: f64,
    /// The right side's value.
    pub right: f64,
    /// Whether it holds (a missing figure, e.g. a probe delay of a bulk flow, fails).
    pub pass: bool,
}

impl Figure {
    /// Parses `flow.NAME.FIGURE` or `queue.SRC->DST.FIGURE`.
    pub fn parse(s: &str) -> Result<Figure, String> {
        let parts: Vec<&str> = s.split('.').collect();
        let [kind, name, figure] = parts[..] else {
            return Err(format!("{s}: flow.NAME.FIGURE or queue.SRC->DST.FIGURE"));
        };
        let (owner, known) = match kind {
            "flow" => (Owner::Flow, FLOW_FIGURES),
            "queue" => (Owner::Queue, QUEUE_FIGURES),
            _ => return Err(format!("{s}: starts with flow. or queue.")),
        };
        if !known.contains(&figure) {
            return Err(format!(
                "{figure}: not a {kind} figure (one of {})",
                known.join(", ")
            ));
        }
        Ok(Figure {
            owner,
            name: name.to_string(),
            figure: figure.to_string(),
        })
    }

    /// The figure as written.
    pub fn text(&self) -> String {
        let kind = match self.owner {
            Owner::Flow => "flow",
            Owner::Queue => "queue",
        };
        format!("{kind}.{}.{}", self.name, self.figure)
    }

    fn validate(&self, t: &Topology) -> Result<(), String> {
        let (known, what) = match self.owner {
            Owner::Flow => (
                (t.flows.iter()).any(|f| f.name == self.name || f.group == self.name),
                "flow",
            ),
            Owner::Queue => (t.port_by_name(&self.name).is_some(), "queue (SRC->DST)"),
        };
        match known {
            true => Ok(()),
            false => Err(format!("{}: no such {what}", self.name)),
        }
    }
}

impl Check {
    /// Parses `FIGURE OP VALUE`.
    pub fn parse(text: &str) -> Result<Check, String> {
        let w: Vec<&str> = text.split_whitespace().collect();
        let (left, op, rest) = match &w[..] {
            [l, op, rest @ ..] if !rest.is_empty() => (Figure::parse(l)?, *op, rest),
            _ => return Err("FIGURE OP VALUE expected".into()),
        };
        let op = match op {
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            o => return Err(format!("{o}: not one of < <= > >=")),
        };
        let num = |s: &str| s.parse::<f64>().ok().filter(|x| x.is_finite());
        let right = match rest {
            [n] => match num(n) {
                Some(x) => Rhs::Number(x),
                None => Rhs::Scaled(1.0, Figure::parse(n)?),
            },
            [n, "*", f] => Rhs::Scaled(
                num(n).ok_or(format!("{n}: not a number"))?,
                Figure::parse(f)?,
            ),
            _ => return Err("VALUE: NUMBER, FIGURE or NUMBER * FIGURE".into()),
        };
        Ok(Check {
            text: text.to_string(),
            left,
            op,
            right,
        })
    }

    /// Whether the figures it names exist in `t`.
    pub fn validate(&self, t: &Topology) -> Result<(), String> {
        self.left.validate(t)?;
        match &self.right {
            Rhs::Number(_) => Ok(()),
            Rhs::Scaled(_, f) => f.validate(t),
        }
    }

    /// Evaluates the check with `value` giving each figure (`None`: it has none).
    pub fn eval(&self, value: impl Fn(&Figure) -> Option<f64>) -> CheckResult {
        let left = value(&self.left);
        let right = match &self.right {
            Rhs::Number(x) => Some(*x),
            Rhs::Scaled(k, f) => value(f).map(|v| k * v),
        };
        let pass = match (left, right) {
            (Some(l), Some(r)) => match self.op {
                Op::Lt => l < r,
                Op::Le => l <= r,
                Op::Gt => l > r,
                Op::Ge => l >= r,
            },
            _ => false,
        };
        CheckResult {
            check: self.text.clone(),
            left: left.unwrap_or(f64::NAN),
            right: right.unwrap_or(f64::NAN),
            pass,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_shapes() {
        let c = Check::parse("flow.probe.delay_ms < 20").unwrap();
        assert_eq!((c.op, c.right.clone()), (Op::Lt, Rhs::Number(20.0)));
        let c = Check::parse("flow.a.goodput_mbps >= 1.5 * flow.b#1.goodput_mbps").unwrap();
        let Rhs::Scaled(k, f) = &c.right else {
            panic!()
        };
        assert_eq!((*k, f.name.as_str(), c.op), (1.5, "b#1", Op::Ge));
        let c = Check::parse("queue.r1->r2.drops > queue.r2->r3.drops").unwrap();
        assert_eq!(c.left.name, "r1->r2");
        assert_eq!(c.left.text(), "queue.r1->r2.drops");
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        let e = |s: &str| Check::parse(s).unwrap_err();
        assert!(e("flow.a.speed < 3").contains("not a flow figure"));
        assert!(e("link.a.drops < 3").contains("flow. or queue."));
        assert!(e("flow.a.bytes = 3").contains("not one of"));
        assert!(e("flow.a.bytes <").contains("expected"));
        assert!(e("flow.a.bytes < x * flow.b.bytes").contains("not a number"));
        assert!(e("flow.a.bytes < 1 2").contains("VALUE"));
    }

    #[test]
    fn evaluates_and_fails_on_a_missing_figure() {
        let c = Check::parse("flow.a.rtt_ms < 2 * flow.b.rtt_ms").unwrap();
        let v = |f: &Figure| match f.name.as_str() {
            "a" => Some(30.0),
            "b" => Some(20.0),
            _ => None,
        };
        let r = c.eval(v);
        assert!(r.pass && r.left == 30.0 && r.right == 40.0);
        let c = Check::parse("flow.a.rtt_ms > flow.b.rtt_ms").unwrap();
        assert!(c.eval(v).pass);
        assert!(!Check::parse("flow.a.rtt_ms > 40").unwrap().eval(v).pass);
        assert!(!Check::parse("flow.c.rtt_ms > 1").unwrap().eval(v).pass);
    }
}
