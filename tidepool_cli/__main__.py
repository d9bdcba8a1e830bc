from tidepool_cli.parser import cli

cli()
