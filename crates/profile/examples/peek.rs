fn main() {
    let args: Vec<String> = std::env::args().collect();
    let p = placer_profile::load_checkpoint(std::path::Path::new(&args[1])).unwrap();
    let model = placer_ir::load_model(std::path::Path::new(&args[2])).unwrap();
    let mut hist = std::collections::BTreeMap::new();
    let mut total_runs = 0.0;
    for m in &p.measurements {
        *hist.entry(m.count).or_insert(0) += 1;
        total_runs += (m.count as f64 + 1.0) * m.median_ns;
    }
    println!(
        "passes {} measurements {} count hist {:?} est kernel time {:.1} s",
        p.passes_done,
        p.measurements.len(),
        hist,
        total_runs / 1e9
    );
    if let Some(c) = placer_profile::IsolationCheck::of(&model, &p).unwrap() {
        println!("{}", c.summary());
        let many: Vec<_> = c.judged().filter(|r| r.twins >= 4).collect();
        let w = many.iter().filter(|r| (r.ratio() / c.pace() - 1.0).abs() <= 0.05).count();
        println!("twins>=4: {} of {} within 5% paced", w, many.len());
        for r in &many {
            println!(
                "    {:40} {:22} alone {:8.2} step {:8.2} ratio {:.3} twins {}",
                r.node,
                r.op,
                r.alone_ns / 1e6,
                r.in_step_ns / 1e6,
                r.ratio(),
                r.twins
            );
        }
        for k in c.classes() {
            println!("{:30} n={:4} within={:4} ratio={:.3}", k.op, k.kernels, k.within, k.median_ratio);
        }
        let mut rows: Vec<_> = c.judged().collect();
        rows.sort_by(|a, b| (a.ratio()).total_cmp(&b.ratio()));
        for r in rows.iter().take(5).chain(rows.iter().rev().take(5)) {
            println!(
                "  {} {} alone {:.2} ms step {:.2} ms ratio {:.3}",
                r.node,
                r.op,
                r.alone_ns / 1e6,
                r.in_step_ns / 1e6,
                r.ratio()
            );
        }
    }
}
