"""The vocabulary of the project catalogue (:mod:`.project_catalogue`): its 30 product types
in WebShop's five categories, the brands of each category, the review titles and bodies, the
aspects reviews speak of and the feature lines of descriptions.

Data only: :func:`.project_catalogue.generate_project_catalogue` draws from it with a seeded
generator, so a change here changes the catalogue's bytes (and its cache directory's name,
:func:`.project_catalogue.catalogue_version`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProductType:
    """Where a product type sits (category, product_category path, the search query it was
    "scraped" for), the nouns its names are made of, the attributes it may have in three
    slots as the original's instructions use them ("Find me <pre> <type> with <with> for
    <for>"), its options, its price range in dollars, and name details."""

    category: str
    path: str
    query: str
    heads: tuple[str, ...]
    pre: tuple[str, ...]
    with_: tuple[str, ...]
    for_: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    price: tuple[int, int]
    details: tuple[str, ...]


def _t(category: str, path: str, query: str, heads: str, pre: str, with_: str, for_: str,
       options: dict[str, str], price: tuple[int, int], details: str) -> ProductType:
    split = lambda text: tuple(s.strip() for s in text.split(";") if s.strip())  # noqa: E731
    return ProductType(category, path, query, split(heads), split(pre), split(with_), split(for_),
                       tuple((name, split(values)) for name, values in options.items()), price, split(details))


_COLORS = "Black; White; Navy Blue; Light Grey; Burgundy; Olive Green; Beige; Pink; Charcoal; Black/White; Red; Khaki"
_SIZES = "X-Small; Small; Medium; Large; X-Large; XX-Large"
_WOOD = "Walnut; Natural Oak; Espresso; White; Rustic Brown; Grey Wash; Black"
_PACKS = "Pack of 1; Pack of 2; Pack of 3; Pack of 6; Pack of 12"

#: the 30 product types, six in each category
TYPES: tuple[ProductType, ...] = (
    # beauty
    _t("beauty", "Beauty & Personal Care › Hair Care › Hair Treatment Oils", "hair treatment oils",
       "Hair Oil; Hair Serum; Scalp Oil; Hair Treatment Oil",
       "paraben free; sulfate free; cruelty free; long lasting; natural; lightweight",
       "argan oil; tea tree; essential oils; natural ingredients; vitamin e; rosemary oil",
       "dry hair; damaged hair; hair growth; hair loss; curly hair",
       {"size": "2 Fl Oz; 4 Fl Oz; 8 Fl Oz; 16 Fl Oz", "scent": "Unscented; Lavender; Coconut; Mint/Tea Tree"},
       (8, 40), "Salon Quality; Travel Size Bottle; With Dropper; Made in USA"),
    _t("beauty", "Beauty & Personal Care › Skin Care › Face › Creams & Moisturizers", "face moisturizers",
       "Face Cream; Face Moisturizer; Night Cream; Day Cream; Gel Moisturizer",
       "cruelty free; fragrance free; non greasy; dermatologist tested; paraben free; vegan",
       "hyaluronic acid; vitamin c; green tea; retinol; shea butter; natural ingredients",
       "sensitive skin; dry skin; fine lines; dark spots; oily skin",
       {"size": "1.7 Oz; 2.5 Oz; 3.4 Oz", "scent": "Unscented; Rose; Cucumber"},
       (10, 65), "Anti Aging Formula; For Men and Women; SPF 30; 24 Hour Hydration"),
    _t("beauty", "Beauty & Personal Care › Makeup › Eyes › Eyeshadow", "eyeshadow palettes",
       "Eyeshadow Palette; Eye Shadow Palette; Shimmer Palette; Matte Palette",
       "long lasting; highly pigmented; cruelty free; waterproof; easy apply; high quality",
       "mirror; brush; matte shades; glitter shades; natural ingredients",
       "eye makeup; daily use; party makeup; travel",
       {"color": "Nude; Smoky; Rose Gold; Sunset; Galaxy; Neutral"},
       (6, 35), "18 Colors; 35 Shades; Professional Makeup Kit; Compact Case"),
    _t("beauty", "Beauty & Personal Care › Oral Care › Toothbrushes › Electric Toothbrushes", "electric toothbrush",
       "Electric Toothbrush; Sonic Toothbrush; Rechargeable Toothbrush; Toothbrush Set",
       "rechargeable; travel friendly; long lasting; waterproof; easy use",
       "replacement heads; travel case; smart timer; soft bristles; pressure sensor",
       "sensitive teeth; oral care; adults; kids; teeth whitening",
       {"color": "White; Black; Pink; Mint Green; Blue", "size": "1 Count; 2 Count"},
       (15, 90), "5 Modes; 4 Brush Heads; 40000 VPM; USB Charging"),
    _t("beauty", "Beauty & Personal Care › Skin Care › Body › Scrubs & Body Treatments", "body scrubs",
       "Body Scrub; Sugar Scrub; Salt Scrub; Exfoliating Scrub; Coffee Scrub",
       "natural; exfoliating; cruelty free; paraben free; moisturizing; vegan",
       "dead sea salt; coconut oil; tea tree; essential oils; natural ingredients; shea butter",
       "dead skin; dry skin; acne; cellulite; sensitive skin",
       {"scent": "Lavender; Coconut; Coffee; Peppermint; Unscented", "size": "8 Oz; 12 Oz; 16 Oz"},
       (9, 38), "Exfoliator; Gift Set; Spa Quality; With Wooden Spoon"),
    _t("beauty", "Beauty & Personal Care › Fragrance › Women's › Eau de Parfum", "womens perfume",
       "Eau de Parfum; Perfume Spray; Fragrance Mist; Perfume Oil",
       "long lasting; travel size; alcohol free; cruelty free; vegan",
       "floral notes; vanilla; jasmine; sandalwood; citrus notes",
       "women; daily wear; evening; gift",
       {"size": "0.33 Fl Oz; 1.7 Fl Oz; 3.4 Fl Oz"},
       (12, 95), "Spray for Women; Gift Box; Roll On; Classic Scent"),
    # food
    _t("grocery", "Grocery & Gourmet Food › Snacks & Sweets › Granola & Nutrition Bars", "granola bars",
       "Granola Bar; Protein Bar; Nutrition Bar; Snack Bar; Energy Bar",
       "gluten free; low sugar; non gmo; plant based; low carb; dairy free; high protein",
       "simple ingredients; dark chocolate; almonds; peanut butter; oats; sea salt",
       "breakfast; snacking; post workout; kids lunch box",
       {"flavor name": "Dark Chocolate Sea Salt; Peanut Butter; Blueberry Almond; Honey Oat; Chocolate Chip",
        "size": "12 Count; 15 Count; 24 Count"},
       (8, 45), "Individually Wrapped; Variety Pack; 1.4 Ounce Bars; Family Size"),
    _t("grocery", "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Tea › Green Tea", "green tea",
       "Green Tea; Matcha Tea; Tea Bags; Loose Leaf Tea; Herbal Tea",
       "organic; caffeine free; non gmo; kosher; decaf; sugar free",
       "jasmine; ginger; lemon; mint; natural flavors; antioxidants",
       "weight loss; digestion; iced tea; daily drinking",
       {"flavor name": "Original; Jasmine; Mint; Lemon Ginger; Honey", "size": "20 Count; 40 Count; 100 Count"},
       (5, 30), "Tea Bags; Premium Grade; Resealable Pouch; Japanese Style"),
    _t("grocery", "Grocery & Gourmet Food › Snacks & Sweets › Chips & Crisps", "potato chips",
       "Potato Chips; Kettle Chips; Veggie Chips; Tortilla Chips; Snack Crisps",
       "gluten free; non gmo; low fat; vegan; kosher; keto friendly",
       "sea salt; olive oil; real vegetables; no artificial flavors; avocado oil",
       "snacking; parties; lunch box; movie night",
       {"flavor name": "Sea Salt; Barbecue; Sour Cream Onion; Salt Vinegar; Jalapeno", "size": _PACKS},
       (4, 32), "Family Size Bag; Single Serve Bags; 5 Ounce; Variety Pack"),
    _t("grocery", "Grocery & Gourmet Food › Candy & Chocolate › Chocolate Truffles", "chocolate gift box",
       "Chocolate Truffles; Chocolate Gift Box; Assorted Chocolates; Chocolate Bars",
       "gluten free; individually wrapped; kosher; gift boxed; sugar free",
       "milk chocolate; dark chocolate; caramel; hazelnut; sea salt",
       "valentines day; birthday gift; christmas; holiday gift",
       {"flavor name": "Milk Chocolate; Dark Chocolate; Assorted; Salted Caramel", "size": "12 Piece; 24 Piece; 36 Piece"},
       (10, 60), "Gift Box; Gourmet Collection; Belgian Style; Holiday Edition"),
    _t("grocery", "Grocery & Gourmet Food › Pantry Staples › Cooking & Baking › Nut Butters", "peanut butter",
       "Peanut Butter; Almond Butter; Nut Butter; Cashew Butter",
       "organic; no sugar added; non gmo; keto friendly; natural; creamy",
       "roasted peanuts; sea salt; honey; chocolate; simple ingredients",
       "breakfast; smoothies; baking; snacking",
       {"flavor name": "Creamy; Crunchy; Honey; Chocolate", "size": "12 Ounce; 16 Ounce; 28 Ounce; Pack of 2"},
       (5, 28), "No Stir; Squeeze Pack; Glass Jar; Family Size"),
    _t("grocery", "Grocery & Gourmet Food › Breakfast Foods › Cereals", "breakfast cereal",
       "Breakfast Cereal; Granola Cereal; Oat Cereal; Muesli",
       "gluten free; whole grain; high fiber; low sugar; non gmo; organic",
       "oats; almonds; dried fruit; honey; cinnamon",
       "breakfast; kids; healthy snacking",
       {"flavor name": "Honey Almond; Cinnamon; Berry; Original", "size": "10 Ounce; 14 Ounce; Pack of 4"},
       (4, 26), "Family Size Box; Value Pack; Ready to Eat; Crunchy Clusters"),
    # fashion
    _t("fashion", "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts", "mens t shirts",
       "T-Shirt; Crew Neck Tee; Graphic Tee; V-Neck T-Shirt; Pocket Tee",
       "machine wash; slim fit; classic fit; officially licensed; wash cold; moisture wicking",
       "short sleeve; cotton heather; polyester spandex; needle sleeve; crew neck",
       "daily wear; gym workout; men; casual outings",
       {"color": _COLORS, "size": _SIZES},
       (9, 35), "Cotton Tee; Casual Top; Athletic Shirt; Soft Comfortable Fit"),
    _t("fashion", "Clothing, Shoes & Jewelry › Women › Clothing › Tops, Tees & Blouses › Tunics", "womens tunic tops",
       "Tunic Top; Blouse; Casual Shirt; Tunic Blouse; Loose Top",
       "loose fit; machine wash; hand wash; relaxed fit; button closure; lightweight",
       "long sleeve; short sleeve; v neck; polyester spandex; floral print",
       "women; daily wear; office; leggings",
       {"color": _COLORS, "size": _SIZES},
       (12, 40), "Casual Blouse; Flowy Shirt; Summer Top; Work Blouse"),
    _t("fashion", "Clothing, Shoes & Jewelry › Women › Shoes › Sandals", "womens sandals",
       "Sandals; Flat Sandals; Slide Sandals; Ankle Strap Sandals; Flip Flops",
       "non slip; open toe; comfortable; lightweight; waterproof",
       "rubber sole; arch support; ankle strap; memory foam; faux leather",
       "women; beach; summer; walking",
       {"color": _COLORS, "size": "6; 6.5; 7; 7.5; 8; 8.5; 9; 10"},
       (14, 55), "Summer Shoes; Casual Slides; Beach Shoes; Wide Width"),
    _t("fashion", "Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running Shoes", "mens running shoes",
       "Running Shoes; Sneakers; Walking Shoes; Trail Running Shoes; Athletic Shoes",
       "non slip; lightweight; breathable; slip resistant; shock absorbing",
       "rubber sole; mesh upper; memory foam; arch support; rubber outsole",
       "men; running; gym workout; walking; tennis",
       {"color": _COLORS, "size": "7; 8; 8.5; 9; 9.5; 10; 11; 12"},
       (25, 120), "Fashion Sneakers; Road Running; Tennis Shoes; Wide Fit"),
    _t("fashion", "Clothing, Shoes & Jewelry › Women › Clothing › Active › Active Pants › Yoga Pants", "yoga pants",
       "Yoga Pants; Leggings; Workout Leggings; Flare Yoga Pants; Jogger Pants",
       "high waist; tummy control; moisture wicking; quick drying; butt lifting; machine wash",
       "pockets; polyester spandex; elastic waistband; drawstring closure",
       "women; gym workout; yoga; running; daily wear",
       {"color": _COLORS, "size": _SIZES},
       (15, 45), "Athletic Pants; Workout Tights; Stretch Fit; 7/8 Length"),
    _t("fashion", "Clothing, Shoes & Jewelry › Men › Clothing › Fashion Hoodies & Sweatshirts", "mens hoodies",
       "Hoodie; Pullover Hoodie; Zip Up Hoodie; Sweatshirt; Fleece Hoodie",
       "machine wash; classic fit; officially licensed; relaxed fit; wash cold",
       "long sleeve; drawstring closure; kangaroo pocket; polyester cotton; fleece lining",
       "men; winter; daily wear; gym workout",
       {"color": _COLORS, "size": _SIZES},
       (20, 60), "Hooded Sweatshirt; Warm Pullover; Casual Jacket; Heavyweight"),
    # furniture
    _t("garden", "Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables", "coffee tables",
       "Coffee Table; Lift Top Coffee Table; Round Coffee Table; Cocktail Table",
       "easy assemble; mid century; assembly required; space saving; easy clean; modern",
       "storage space; metal frame; solid wood; tempered glass; open shelf",
       "living room; home office; small spaces; apartment",
       {"color": _WOOD},
       (60, 320), "with Storage; Center Table; Farmhouse Style; 2 Tier"),
    _t("garden", "Home & Kitchen › Furniture › Bedroom Furniture › Nightstands", "nightstands",
       "Nightstand; Bedside Table; End Table; Night Stand with Drawer",
       "easy assemble; eco friendly; white item; easy install; space saving",
       "storage space; drawer; charging station; solid wood; metal frame",
       "bedroom; living room; small spaces; dorm",
       {"color": _WOOD, "size": "1 Pack; 2 Pack"},
       (35, 180), "with Drawer; Set of 2; Side Table; Modern Design"),
    _t("garden", "Home & Kitchen › Furniture › Home Office Furniture › Home Office Desks", "office desk",
       "Computer Desk; Writing Desk; Standing Desk; Office Desk; Gaming Desk",
       "height adjustable; easy assemble; heavy duty; space saving; easy clean; modern",
       "steel frame; storage shelves; keyboard tray; monitor stand; wood frame",
       "home office; study; gaming; small spaces",
       {"color": _WOOD, "size": "40 Inch; 47 Inch; 55 Inch; 63 Inch"},
       (70, 380), "Study Table; Workstation; with Shelves; L Shaped"),
    _t("garden", "Home & Kitchen › Furniture › Bedroom Furniture › Beds, Frames & Bases › Bed Frames", "bed frame",
       "Bed Frame; Platform Bed Frame; Upholstered Bed; Metal Bed Frame",
       "heavy duty; easy assemble; noise free; no box spring needed; assembly required",
       "metal frame; wood slats; headboard; storage space; under bed storage",
       "bedroom; guest room; kids room",
       {"size": "Twin; Full; Queen; King", "color": "Black; Grey; White; Brown"},
       (90, 450), "Mattress Foundation; Heavy Duty Slats; 14 Inch; Modern Style"),
    _t("garden", "Home & Kitchen › Furniture › Living Room Furniture › Chairs › Accent Chairs", "accent chair",
       "Accent Chair; Armchair; Lounge Chair; Club Chair; Swivel Chair",
       "mid century; easy assemble; comfortable; high density; modern",
       "solid wood; wood legs; faux leather; velvet fabric; memory foam",
       "living room; bedroom; reading nook; home office",
       {"color": "Grey; Navy Blue; Green Velvet; Cream; Brown Leather; Pink"},
       (80, 350), "Upholstered Chair; Reading Chair; Side Chair; Comfy Seat"),
    _t("garden", "Home & Kitchen › Home Décor Products › Mirrors › Wall-Mounted Mirrors", "wall mirror",
       "Wall Mirror; Bathroom Mirror; Vanity Mirror; Round Mirror; Decorative Mirror",
       "wall mounted; easy install; shatter proof; modern; high quality",
       "metal frame; wood frame; led light; beveled edge; clear glass",
       "living room; bathroom; bedroom; entryway; home decor",
       {"size": "20 Inch; 24 Inch; 30 Inch; 36 Inch", "color": "Black; Gold; Silver; Natural Wood"},
       (25, 200), "Round Mirror; Vanity Mirror; Decorative Mirror; Hanging Mirror"),
    # electronics
    _t("electronics", "Electronics › Portable Audio & Video › Portable Speakers & Docks › Portable Bluetooth Speakers",
       "bluetooth speaker",
       "Bluetooth Speaker; Portable Speaker; Wireless Speaker; Party Speaker; Mini Speaker",
       "waterproof; portable; high quality; long lasting; hands free",
       "wireless bluetooth; stereo sound; deep bass; usb port; built in microphone",
       "outdoor; home; travel; party; shower",
       {"color": "Black; Blue; Red; Grey; Camo"},
       (18, 130), "20W Stereo Sound; 24H Playtime; IPX7; With FM Radio"),
    _t("electronics", "Electronics › Computers & Accessories › Data Storage › USB Flash Drives", "usb flash drive",
       "USB Flash Drive; Thumb Drive; Memory Stick; USB C Flash Drive",
       "high speed; plug play; easy carry; durable; compact",
       "usb 3.0; usb c; metal case; key chain; password protection",
       "laptop; data storage; backup; phone",
       {"size": "32GB; 64GB; 128GB; 256GB", "color": "Silver; Black; Blue"},
       (6, 60), "2 Pack; 5 Pack; Dual Drive; Swivel Design"),
    _t("electronics", "Electronics › Cell Phones & Accessories › Accessories › Screen Protectors", "screen protector",
       "Screen Protector; Tempered Glass Screen Protector; Privacy Screen Protector; Camera Lens Protector",
       "easy install; bubble free; case friendly; high definition; anti scratch",
       "tempered glass; glass screen; alignment frame; 9h hardness",
       "iphone pro; samsung galaxy; cell phone; mobile phone",
       {"size": "1 Pack; 2 Pack; 3 Pack"},
       (5, 20), "Installation Kit; Full Coverage; Ultra Clear; Privacy Glass"),
    _t("electronics", "Electronics › Television & Video › Accessories › Remote Controls", "replacement remote",
       "Replacement Remote; Remote Control; Universal Remote; Voice Remote; TV Remote",
       "easy use; no setup needed; long range; durable",
       "batteries; voice control; backlit buttons; shortcut buttons",
       "smart tv; home theater; sound bar; streaming",
       {"color": "Black; Silver; White"},
       (7, 35), "Universal Fit; Replacement Part; No Programming; 2 Pack"),
    _t("electronics", "Electronics › Headphones, Earbuds & Accessories › Earbud Headphones", "wireless earbuds",
       "Wireless Earbuds; Bluetooth Earbuds; Noise Cancelling Earbuds; Sports Earbuds",
       "noise cancelling; waterproof; hands free; long lasting; high quality",
       "wireless bluetooth; charging case; built in microphone; touch control; deep bass",
       "running; gym workout; phone calls; travel",
       {"color": "Black; White; Navy Blue; Rose Gold"},
       (15, 150), "40H Playtime; In Ear Headphones; Sweatproof; With Mic"),
    _t("electronics", "Electronics › Camera & Photo › Video Surveillance › Surveillance Cameras", "security camera",
       "Security Camera; WiFi Camera; Indoor Camera; Outdoor Camera; Baby Monitor Camera",
       "high definition; easy install; motion detection; night vision; wireless",
       "two way audio; cloud storage; sd card slot; spotlight; pan tilt",
       "home security; baby monitor; pet camera; outdoor",
       {"size": "1 Pack; 2 Pack; 4 Pack", "color": "White; Black"},
       (20, 160), "1080P; 2K; Works with Alexa; Motion Alerts"),
)

BRANDS = {
    "beauty": "Lumera; Verdana; Aurelle; Solvie; Petalin; Nuvara; Kelso Botanics; Mirabel",
    "grocery": "Harvest Lane; Oakridge Pantry; Sunny Fields; Brightmill; Tiller & Co; Nutwise; Golden Acre",
    "fashion": "Northwind; Urbanista; Coastline; Trailpeak; Velora; Marlow; Kestrel Athletic; Bellhaven",
    "garden": "Oakhaven; Nordhem; Loftcraft; Homevia; Birchwood; Casa Linea; Tribeca Home",
    "electronics": "Voltix; Sonora; Brightek; Nexo; Kinetra; Auralink; Pixelon; Tecvault",
}
REVIEW_TITLES = (
    "Works great", "Exactly as described", "Good value for the price", "Not what I expected",
    "Love it", "Decent quality", "Would buy again", "Arrived damaged", "Pretty good", "Five stars",
)
REVIEW_BODIES = (
    "I have used this {head} for a few weeks now and it does what it says.",
    "The {head} arrived quickly and the quality is better than I expected for the price.",
    "Good {head}, but the {aspect} could be better.",
    "My second {head} from this brand; the {aspect} is still great.",
    "Returned it: the {aspect} was not as shown in the pictures.",
    "Bought this {head} as a gift and they loved it.",
)
ASPECTS = {
    "beauty": "scent; texture; packaging; results",
    "grocery": "taste; texture; packaging; freshness",
    "fashion": "fit; fabric; color; stitching",
    "garden": "assembly; finish; sturdiness; size",
    "electronics": "battery life; sound; build quality; connectivity",
}
FEATURES = {
    "beauty": ("Gentle on skin and suitable for everyday use", "Free from harsh chemicals and artificial dyes",
               "Dermatologist reviewed formula made in small batches", "Recyclable packaging, never tested on animals"),
    "grocery": ("Made with simple ingredients you can pronounce", "Packed fresh in a facility that handles tree nuts",
             "Great for on the go snacking at work or school", "Resealable packaging keeps it fresh longer"),
    "fashion": ("Soft breathable fabric that keeps its shape wash after wash",
                "Tagless design for all day comfort", "Imported; please check the size chart before ordering",
                "Pairs easily with jeans, shorts or joggers"),
    "garden": ("All hardware and step by step instructions included", "Sturdy construction supports up to 200 lbs",
                  "Wipe clean with a damp cloth", "Fits modern, rustic and farmhouse decor"),
    "electronics": ("Plug and play with no driver needed", "Backed by a 12 month warranty and friendly support",
                    "Compact design that fits in a pocket or bag", "Compatible with most phones, tablets and laptops"),
}
