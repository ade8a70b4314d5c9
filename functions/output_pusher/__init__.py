"""The output events stream's consumer: each event, posted to the connections that follow its job."""
