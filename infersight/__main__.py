from infersight.cli import main

raise SystemExit(main())
