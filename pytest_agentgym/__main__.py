from pytest_agentgym.cli import main

raise SystemExit(main())
