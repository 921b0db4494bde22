-- Pre-hook: the marts schema exists before the runtime replaces its table (a fresh lake has none).
create schema if not exists flow_marts;
