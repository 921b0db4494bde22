-- Pre-hook: the marts schema exists before the runtime replaces its table.
create schema if not exists flow_marts;
