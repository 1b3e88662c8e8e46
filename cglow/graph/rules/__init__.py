"""Shape rules, one module per op family: functions of a node's input types (registry.Args) to its output types,
refusing by name what cglow cannot compile. The op specifications (lower/ops/) name the rule of each op."""
