"""`tidepool`: Tidepool's command line (docs/cli.md). Standard library (urllib) and PyYAML only: no Django."""
