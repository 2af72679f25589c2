"""The engine core: blueprint to plan (compiler), what runs next (scheduler, pure), running it (runner), templates."""
