"""From a source to a composed release: native dbt compile, flow capture and packs, composition, the bundle."""
