#![allow(clippy::unwrap_used, clippy::print_stdout)]
use placer_ir::*;
const MLP: &str = include_str!("data/mlp.json");

fn show(label: &str, src: &str) {
    match parse_model(src) {
        Ok(_) => println!("== {label}: OK"),
        Err(d) => {
            println!("== {label}:");
            let lines: Vec<&str> = src.lines().collect();
            for x in d.iter() {
                println!("  {:?} {:?} {x}", x.kind, x.subject);
                if let Some(l) = x.location {
                    if let Some(line) = lines.get(l.line - 1) {
                        let rest: String = line.chars().skip(l.column - 1).take(30).collect();
                        println!("      -> `{rest}`");
                    } else { println!("      -> (past end, {} lines)", lines.len()); }
                }
            }
        }
    }
}
fn rep(s: &str, a: &str, b: &str) -> String { assert_eq!(s.matches(a).count(), 1, "{a}"); s.replace(a, b) }

#[test]
fn explore() {
    show("valid", MLP);
    let order: Vec<&str> = MLP.lines().filter(|l| l.starts_with("    {\"name\"") && l.contains("\"op\"")).map(|l| l.split('"').nth(3).unwrap()).collect();
    let sched = |names: &[&str]| -> String {
        let items: Vec<String> = names.iter().map(|n| format!("    \"{n}\"")).collect();
        let body = MLP.trim_end().strip_suffix('}').unwrap().trim_end();
        format!("{body},\n  \"schedule\": [\n{}\n  ]\n}}\n", items.join(",\n"))
    };
    show("sched ok", &sched(&order));
    let mut o = order.clone(); o.swap(0, 1); show("sched dep", &sched(&o));
    let mut o = order.clone(); o.remove(2); show("sched miss", &sched(&o));
    let mut o = order.clone(); o.insert(3, "relu9"); show("sched unknown", &sched(&o));
    let mut o = order.clone(); o.insert(3, "fc1"); show("sched repeat", &sched(&o));
    let mut o = order.clone(); let u = o.remove(15); o.insert(3, u); show("sched update before reader", &sched(&o));
    let mut o = order.clone(); o.swap(13, 14); show("sched swap updates ok", &sched(&o));
}

const CONV: &str = r#"{
  "format": "placer-model",
  "version": 1,
  "name": "conv",
  "tensors": [
    {"name": "x", "shape": [1, 3, 8, 8], "dtype": "f32", "role": "input"},
    {"name": "w", "shape": [4, 3, 3, 3], "dtype": "f32", "role": "weight"},
    {"name": "y", "shape": [1, 4, 6, 6], "dtype": "f32", "role": "activation"}
  ],
  "nodes": [
    {"name": "conv", "op": "conv2d", "attrs": {"padding": [0, 0]}, "inputs": ["x", "w"], "outputs": ["y"]}
  ]
}
"#;

fn probe(label: &str, src: &str) {
    let r = std::panic::catch_unwind(|| parse_model(src).map(|_| ()));
    match r { Err(_) => println!("== {label}: PANIC"), Ok(_) => show(label, src) }
}

#[test]
fn explore2() {
    probe("conv ok", CONV);
    probe("conv pad", &rep(CONV, "\"padding\": [0, 0]", "\"padding\": [9223372036854775807, 0]"));
    probe("conv dil", &rep(CONV, "\"padding\": [0, 0]", "\"dilation\": [9223372036854775807, 1]"));
    probe("conv chan", &rep(CONV, "[4, 3, 3, 3]", "[4, 2, 3, 3]"));
    let split = r#"{"format": "placer-model", "version": 1, "name": "s",
 "tensors": [{"name": "x", "shape": [4], "dtype": "f32", "role": "input"},
  {"name": "a", "shape": [2], "dtype": "f32", "role": "activation"},
  {"name": "b", "shape": [2], "dtype": "f32", "role": "activation"}],
 "nodes": [{"name": "s", "op": "split", "attrs": {"axis": 0, "sizes": [9223372036854775807, 2]}, "inputs": ["x"], "outputs": ["a", "b"]}]}"#;
    probe("split", split);
    let n = 16390;
    let ins: Vec<&str> = vec!["\"x\""; n];
    let concat = format!(r#"{{"format": "placer-model", "version": 1, "name": "c",
 "tensors": [{{"name": "x", "shape": [1125899906842624], "dtype": "u8", "role": "input"}},
  {{"name": "y", "shape": [2], "dtype": "u8", "role": "activation"}}],
 "nodes": [{{"name": "c", "op": "concat", "attrs": {{"axis": 0}}, "inputs": [{}], "outputs": ["y"]}}]}}"#, ins.join(","));
    probe("concat", &concat);
}
