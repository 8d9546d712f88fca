from paperflows.cli import main

main()
