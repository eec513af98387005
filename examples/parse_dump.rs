fn main() {
    let path = std::env::args().nth(1).unwrap_or_default();
    let src = std::fs::read_to_string(path).unwrap_or_default();
    let (file, diags) = ctxpack::syntax::parse(&src);
    println!("{} items", file.items.len());
    for i in &file.items {
        println!("{:?} doc={:?}", std::mem::discriminant(&i.kind), i.doc);
    }
    for d in diags {
        println!("{} {:?} {}", d.code, d.span, d.message);
    }
}
