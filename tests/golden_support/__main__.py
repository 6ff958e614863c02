from golden_support import main

main()
