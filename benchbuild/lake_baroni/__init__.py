"""Lake & Baroni's (2018, §5) small English→French set with the novel word "daxy": `build-lake-baroni-fr`."""
